"""Tiny models of the families beyond LLaVA-1.5/NeXT and Qwen-VL (see :mod:`._families`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medibench.models._hf_processor import images_only
from tests.conformance import _templates as T
from tests.conformance._common import QWEN_SPECIALS, TEXT, ids, make_model, save
from tests.conformance._tokenizer import word_tokenizer

SIGLIP = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
          "num_attention_heads": 2, "image_size": 16, "patch_size": 4}  # fmt: skip


def build_llava_onevision(folder: Path) -> Path:
    """LLaVA-OneVision (``llava-hf/llava-onevision-qwen2-0.5b-ov-hf``): SigLIP + Qwen2, ChatML."""
    import transformers as tf

    tok = word_tokenizer([*QWEN_SPECIALS, "<image>", "<video>"], bos=None, eos="<|im_end|>",
                         pad="<|endoftext|>")  # fmt: skip
    grid = [[16, 16], [16, 32], [32, 16]]
    processor = images_only(tf.LlavaOnevisionProcessor)(
        image_processor=tf.LlavaOnevisionImageProcessorPil(
            size={"height": 16, "width": 16}, image_grid_pinpoints=grid),
        tokenizer=tok, video_processor=None, num_image_tokens=16,
        vision_feature_select_strategy="full", chat_template=T.LLAVA_ONEVISION,
    )  # fmt: skip
    end, im_end, img, vid = ids(tok, "<|endoftext|>", "<|im_end|>", "<image>", "<video>")
    config = tf.LlavaOnevisionConfig(
        vision_config=tf.SiglipVisionConfig(**SIGLIP),
        text_config=tf.Qwen2Config(vocab_size=len(tok), bos_token_id=end, eos_token_id=im_end,
                                   pad_token_id=end, **TEXT),
        image_token_index=img, video_token_index=vid, image_grid_pinpoints=grid,
        vision_feature_select_strategy="full", vision_feature_layer=-1,
    )  # fmt: skip
    model = make_model(tf.LlavaOnevisionForConditionalGeneration, config)
    return save(folder, model, processor, eos=[im_end, end], bos=end, pad=end)


def _wide_logits(model: Any, scale: float = 40.0) -> None:
    """Scale a Gemma model's output projection: its embeddings are multiplied by sqrt(hidden)
    and every block's output is normalised, so at these widths the logits of a small random
    init stay within about one nat of each other and no edit can make an answer certain."""
    import torch

    with torch.no_grad():
        model.lm_head.weight.mul_(scale)


def build_gemma3(folder: Path) -> Path:
    """Gemma 3 (``google/gemma-3-4b-it``, MedGemma's base): SigLIP + Gemma 3, pooled image
    tokens; the tokenizer's eos is ``<eos>`` but turns end at ``<end_of_turn>``."""
    import transformers as tf

    named = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
             "image_token": "<image_soft_token>"}  # fmt: skip
    tok = word_tokenizer(["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>",
                          *named.values()], bos="<bos>", eos="<eos>", pad="<pad>",
                         named=named)  # fmt: skip
    processor = tf.Gemma3Processor(
        image_processor=tf.Gemma3ImageProcessorPil(size={"height": 16, "width": 16}),
        tokenizer=tok, chat_template=T.GEMMA3, image_seq_length=4)  # fmt: skip
    pad, eos, bos, eot, boi, eoi, img = ids(tok, "<pad>", "<eos>", "<bos>", "<end_of_turn>",
                                             *named.values())  # fmt: skip
    config = tf.Gemma3Config(
        text_config=tf.Gemma3TextConfig(
            vocab_size=len(tok), bos_token_id=bos, eos_token_id=[eos, eot], pad_token_id=pad,
            head_dim=16, sliding_window=64, **{**TEXT, "initializer_range": 0.1}),
        vision_config=tf.SiglipVisionConfig(**SIGLIP), mm_tokens_per_image=4,
        tie_word_embeddings=False,
        boi_token_index=boi, eoi_token_index=eoi, image_token_index=img,
    )  # fmt: skip
    model = make_model(tf.Gemma3ForConditionalGeneration, config)
    _wide_logits(model)
    return save(folder, model, processor, eos=[eos, eot], bos=bos, pad=pad)


def build_paligemma(folder: Path) -> Path:
    """PaliGemma (``google/paligemma-3b-mix-224``): no chat template; the processor writes
    ``<image>...<bos>{prefix}\\n`` and the answer ends with ``<eos>``."""
    import transformers as tf

    tok = word_tokenizer(["<pad>", "<eos>", "<bos>", "<image>"], bos="<bos>", eos="<eos>",
                         pad="<pad>", named={"image_token": "<image>"})  # fmt: skip
    image_processor = tf.SiglipImageProcessorPil(size={"height": 16, "width": 16})
    image_processor.image_seq_length = 16
    processor = tf.PaliGemmaProcessor(image_processor=image_processor, tokenizer=tok)
    pad, eos, bos, img = ids(tok, "<pad>", "<eos>", "<bos>", "<image>")
    config = tf.PaliGemmaConfig(
        vision_config=tf.SiglipVisionConfig(**SIGLIP, projection_dim=32),
        text_config=tf.GemmaConfig(vocab_size=len(processor.tokenizer), bos_token_id=bos,
                                   eos_token_id=eos, pad_token_id=pad, head_dim=16, **TEXT),
        image_token_index=img, projection_dim=32,
    )  # fmt: skip
    model = make_model(tf.PaliGemmaForConditionalGeneration, config)
    return save(folder, model, processor, eos=[eos], bos=bos, pad=pad)


def _idefics_tokenizer() -> Any:
    rows = [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]
    return word_tokenizer(["<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>",
                           "<fake_token_around_image>", "<image>", "<end_of_utterance>",
                           "<global-img>", *rows], bos="<|begin_of_text|>",
                          eos="<|end_of_text|>", pad="<|finetune_right_pad_id|>")  # fmt: skip


def build_idefics3(folder: Path) -> Path:
    """Idefics3 (``HuggingFaceM4/Idefics3-8B-Llama3``): SigLIP-style encoder, pixel shuffle,
    Llama 3; turns end at ``<end_of_utterance>``."""
    import transformers as tf

    tok = _idefics_tokenizer()
    processor = tf.Idefics3Processor(
        image_processor=tf.Idefics3ImageProcessorPil(
            size={"longest_edge": 16}, max_image_size={"longest_edge": 16},
            do_image_splitting=False),
        tokenizer=tok, image_seq_len=4, chat_template=T.IDEFICS3)  # fmt: skip
    bos, eos, pad, img, eou = ids(tok, "<|begin_of_text|>", "<|end_of_text|>",
                                   "<|finetune_right_pad_id|>", "<image>", "<end_of_utterance>")
    config = tf.Idefics3Config(
        vision_config=tf.Idefics3VisionConfig(**SIGLIP),
        text_config=tf.LlamaConfig(vocab_size=len(tok), bos_token_id=bos, eos_token_id=eos,
                                   pad_token_id=pad, **TEXT),
        image_token_id=img, scale_factor=2,
    )  # fmt: skip
    model = make_model(tf.Idefics3ForConditionalGeneration, config)
    return save(folder, model, processor, eos=[eos, eou], bos=bos, pad=pad)


def build_smolvlm(folder: Path) -> Path:
    """SmolVLM (``HuggingFaceTB/SmolVLM-256M-Instruct``): Idefics3's design, a video processor
    that needs torchvision."""
    import transformers as tf

    tok = _idefics_tokenizer()
    processor = images_only(tf.SmolVLMProcessor)(
        image_processor=tf.SmolVLMImageProcessorPil(
            size={"longest_edge": 16}, max_image_size={"longest_edge": 16},
            do_image_splitting=False),
        tokenizer=tok, video_processor=None, image_seq_len=4, chat_template=T.IDEFICS3)  # fmt: skip
    bos, eos, pad, img, eou = ids(tok, "<|begin_of_text|>", "<|end_of_text|>",
                                   "<|finetune_right_pad_id|>", "<image>", "<end_of_utterance>")
    config = tf.SmolVLMConfig(
        vision_config=tf.SmolVLMVisionConfig(**SIGLIP),
        text_config=tf.LlamaConfig(vocab_size=len(tok), bos_token_id=bos, eos_token_id=eou,
                                   pad_token_id=pad, **TEXT),
        image_token_id=img, scale_factor=2,
    )  # fmt: skip
    model = make_model(tf.SmolVLMForConditionalGeneration, config)
    return save(folder, model, processor, eos=[eou], bos=bos, pad=pad)


def build_mllama(folder: Path) -> Path:
    """Llama 3.2 Vision (``meta-llama/Llama-3.2-11B-Vision-Instruct``): tiled images through
    cross-attention layers; turns end at ``<|eot_id|>``."""
    import transformers as tf

    tok = word_tokenizer(["<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>",
                          "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>",
                          "<|image|>", "<|python_tag|>"], bos="<|begin_of_text|>",
                         eos="<|eot_id|>", pad="<|finetune_right_pad_id|>")  # fmt: skip
    processor = tf.MllamaProcessor(
        image_processor=tf.MllamaImageProcessorPil(size={"height": 16, "width": 16},
                                                   max_image_tiles=2),
        tokenizer=tok, chat_template=T.MLLAMA)  # fmt: skip
    bos, end, pad, eom, eot, img = ids(tok, "<|begin_of_text|>", "<|end_of_text|>",
                                        "<|finetune_right_pad_id|>", "<|eom_id|>", "<|eot_id|>",
                                        "<|image|>")  # fmt: skip
    config = tf.MllamaConfig(
        vision_config=tf.MllamaVisionConfig(
            hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_global_layers=1,
            attention_heads=2, image_size=16, patch_size=8, max_num_tiles=2,
            intermediate_layers_indices=[0], vision_output_dim=32,
            supported_aspect_ratios=[[1, 1], [1, 2], [2, 1]]),
        text_config=tf.MllamaTextConfig(
            vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=2, cross_attention_layers=[0],
            bos_token_id=bos, eos_token_id=eot, pad_token_id=pad),
        image_token_index=img,
    )  # fmt: skip
    model = make_model(tf.MllamaForConditionalGeneration, config)
    return save(folder, model, processor, eos=[end, eom, eot], bos=bos, pad=pad)


def build_internvl(folder: Path) -> Path:
    """InternVL 3 (``OpenGVLab/InternVL3-1B-hf``): InternViT + Qwen2, ChatML, ``<IMG_CONTEXT>``."""
    import transformers as tf

    named = {"start_image_token": "<img>", "end_image_token": "</img>",
             "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"}  # fmt: skip
    tok = word_tokenizer([*QWEN_SPECIALS, *named.values()], bos=None, eos="<|im_end|>",
                         pad="<|endoftext|>", named=named)  # fmt: skip
    processor = images_only(tf.InternVLProcessor)(
        image_processor=tf.GotOcr2ImageProcessorPil(size={"height": 16, "width": 16},
                                                    crop_to_patches=False),
        tokenizer=tok, video_processor=None, image_seq_length=4,
        chat_template=T.INTERNVL)  # fmt: skip
    end, im_end, ctx = ids(tok, "<|endoftext|>", "<|im_end|>", "<IMG_CONTEXT>")
    config = tf.InternVLConfig(
        vision_config=tf.InternVLVisionConfig(
            hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
            image_size=[16, 16], patch_size=[4, 4]),
        text_config=tf.Qwen2Config(vocab_size=len(tok), bos_token_id=end, eos_token_id=im_end,
                                   pad_token_id=end, **TEXT),
        image_token_id=ctx, downsample_ratio=0.5,
    )  # fmt: skip
    model = make_model(tf.InternVLForConditionalGeneration, config)
    return save(folder, model, processor, eos=[im_end, end], bos=end, pad=end)

