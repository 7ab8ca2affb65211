"""A tiny random-weight unified model (text and images from one model) for ``unified:``:
Janus-Pro (``deepseek-community/Janus-Pro-1B``) as transformers' conversion saves it.

Its real config classes (Llama text model, SigLIP-like vision encoder, VQ-VAE for image
tokens), the ``JanusProcessor`` with the PIL image processor and the default system prompt on,
a word-level tokenizer with Janus's special tokens that starts every text with BOS (as the
Hub's Llama tokenizer does), the Janus chat template, and the generation config of the
conversion (temperature 1, guidance 5, the pad id and ``generation_kwargs.boi_token_id``),
saved with ``save_pretrained`` into ``folder``. A 16-pixel understanding image of 16 tokens;
images are made of 16 tokens on a 4 x 4 grid, decoded to 16 x 16 pixels.
"""

from __future__ import annotations

from pathlib import Path

from tests.conformance._common import TEXT, ids, make_model, save
from tests.conformance._templates import _PARTS
from tests.conformance._tokenizer import word_tokenizer

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
#: Janus's chat format (DeepSeek's): ``<|User|>: <image_placeholder>\n{text}\n\n<|Assistant|>:``,
#: an answer closed by ``<｜end▁of▁sentence｜>``; kept here so the other families' cache keys stay.
JANUS_TEMPLATE = _PARTS + (
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'user' -%}<|User|>: {{ parts(m, '<image_placeholder>\n') }}{{ '\n\n' }}"
    "{%- else -%}<|Assistant|>: {{ parts(m, '') }}<｜end▁of▁sentence｜>{%- endif -%}"
    "{%- endfor -%}{%- if add_generation_prompt %}<|Assistant|>:{% endif -%}"
)
IMAGE_TOKENS = {"image_token": "<image_placeholder>", "boi_token": "<begin_of_image>",
                "eoi_token": "<end_of_image>"}  # fmt: skip


def build_janus(folder: Path) -> Path:
    """Janus-Pro (``deepseek-community/Janus-Pro-1B``): understanding and image generation."""
    import transformers as tf
    from tokenizers import processors

    tok = word_tokenizer([BOS, EOS, PAD, "<|User|>", "<|Assistant|>", *IMAGE_TOKENS.values()],
                         bos=BOS, eos=EOS, pad=PAD, named=IMAGE_TOKENS)  # fmt: skip
    bos, eos, pad, img, boi = ids(tok, BOS, EOS, PAD, *list(IMAGE_TOKENS.values())[:2])
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bos)]
    )
    processor = tf.JanusProcessor(
        image_processor=tf.JanusImageProcessorPil(size={"height": 16, "width": 16}, min_size=14,
                                                  image_mean=[0.5] * 3, image_std=[0.5] * 3),
        tokenizer=tok, chat_template=JANUS_TEMPLATE, use_default_system_prompt=True,
        num_image_tokens=16,
    )  # fmt: skip
    config = tf.JanusConfig(
        text_config=tf.LlamaConfig(vocab_size=len(tok), bos_token_id=bos, eos_token_id=eos,
                                   pad_token_id=pad, **TEXT),
        vision_config={"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": 16, "patch_size": 4, "num_image_tokens": 16,
                       "projection_dim": 32, "mlp_ratio": 2.0, "depth": 1},
        vq_config={"embed_dim": 8, "num_embeddings": 24, "latent_channels": 8,
                   "base_channels": 32, "channel_multiplier": [1, 1, 1], "num_res_blocks": 1,
                   "projection_dim": 32, "image_token_embed_dim": 32},
        image_token_id=img,
    )  # fmt: skip
    model = make_model(tf.JanusForConditionalGeneration, config)
    gen = model.generation_config
    gen._from_model_config = False  # as the conversion: the saved file, not the model config
    gen.temperature, gen.guidance_scale = 1.0, 5.0
    gen.generation_kwargs = {"boi_token_id": boi}
    return save(folder, model, processor, eos=[eos], bos=bos, pad=pad)
