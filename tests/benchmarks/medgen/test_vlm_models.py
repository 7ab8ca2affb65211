"""The transformers VLM adapter on a tiny random LLaVA saved here (nothing is downloaded), and
the module:callable adapters."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.models.compose import as_answering_model, is_answering_model
from medibench.models.vlm import VLM, CallableVLM, TransformersVLM

WORDS = ["<pad>", "<unk>", "<s>", "</s>", "<image>", "user", "assistant", ":", "what", "is",
         "shown", "?", "a", "lung", "heart", "mass", "normal", "left", "right"]  # fmt: skip
TEMPLATE = (
    "{% for m in messages %}user : {% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image> {% else %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endfor %} assistant :"
)


@pytest.fixture(scope="module")
def tiny_llava(tmp_path_factory):
    pytest.importorskip("transformers")
    import torch
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers
    from transformers import (
        CLIPImageProcessorPil,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    folder = tmp_path_factory.mktemp("tiny-llava")
    vocab = {w: i for i, w in enumerate(WORDS)}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.normalizer = normalizers.Lowercase()
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.add_special_tokens([AddedToken(w, special=True, normalized=False) for w in WORDS[:5]])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
        eos_token="</s>",
    )  # fmt: skip
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessorPil(
            size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16}
        ),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        image_token="<image>",
        num_additional_image_tokens=1,
        chat_template=TEMPLATE,
    )
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
            image_size=16, patch_size=8,
        ),
        text_config=LlamaConfig(
            vocab_size=len(WORDS), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
            num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
            pad_token_id=0, bos_token_id=2, eos_token_id=3, initializer_range=0.5,
        ),
        image_token_index=vocab["<image>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )  # fmt: skip
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def test_transformers_vlm_answers_deterministically(tiny_llava):
    vlm = TransformersVLM(tiny_llava, max_new_tokens=4)
    assert isinstance(vlm, VLM) and vlm.name == tiny_llava.name
    image = np.random.default_rng(0).integers(0, 256, (20, 24, 3), dtype=np.uint8)
    first = vlm.answer([image], "what is shown ?", seed=1)
    assert first == vlm.answer([image], "what is shown ?", seed=1)
    assert isinstance(first, str) and set(first.split()) <= set(WORDS)
    # the same text as the model's own greedy decode of the same prompt
    import torch
    from PIL import Image

    text = vlm.processor.apply_chat_template(
        [
            {
                "role": "user",
                "content": [{"type": "image"}, {"type": "text", "text": "what is shown ?"}],
            }
        ],
        add_generation_prompt=True,
    )
    enc = vlm.processor(images=[Image.fromarray(image)], text=[text], return_tensors="pt")
    with torch.inference_mode():
        seq = vlm.model.generate(
            **enc, max_new_tokens=4, do_sample=False, pad_token_id=0, eos_token_id=3
        )
    new = seq[0, enc["input_ids"].shape[1] :]
    assert first == vlm.processor.tokenizer.decode(new, skip_special_tokens=True).strip()


def test_one_image_vlm_gets_the_contact_sheet(tiny_llava):
    vlm = TransformersVLM(tiny_llava, max_new_tokens=2, max_images=1)
    images = [np.full((20, 24, 3), v, np.uint8) for v in (10, 200)]
    calls = []
    original = vlm.processor.__class__.__call__

    def spy(self, *args, **kwargs):
        calls.append(kwargs["images"])
        return original(self, *args, **kwargs)

    vlm.processor.__class__.__call__ = spy
    try:
        vlm.answer(images, "what is shown ?", seed=0)
    finally:
        vlm.processor.__class__.__call__ = original
    (nested,) = calls  # one list of images per prompt: here one prompt, the sheet alone
    assert len(nested) == 1 and len(nested[0]) == 1
    assert nested[0][0].size == (2 * 768, 768 + 44)


def test_missing_model_folder_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "vlm" / "config.json")):
        TransformersVLM(tmp_path / "vlm")


def test_module_callables_become_answering_models():
    def fn(images, prompt, *, seed):
        return f"{len(images)}:{prompt}:{seed}"

    vlm = as_answering_model(fn, {}, name="mod:fn")
    assert isinstance(vlm, CallableVLM) and vlm.name == "fn"
    assert vlm.answer([np.zeros((2, 2, 3), np.uint8)], "q", seed=3) == "1:q:3"
    assert is_answering_model(vlm) and not is_answering_model(object())
    with pytest.raises(TypeError, match="has no answer or generate"):
        as_answering_model(dict, {"a": 1}, name="mod:dict")


def test_answering_models_are_refused_on_ray(tmp_path):
    from medibench.runs import RunConfig, RunError, run

    from .answer_data import build_folder

    folder = build_folder(tmp_path / "data")
    config = RunConfig(
        dataset=f"medgen:{folder / 'vqa.jsonl'}",
        models=("openai-chat:gpt-4o",),
        model_options=("api_key_required=false",),
        out=tmp_path / "run",
        executor="ray",
    )
    with pytest.raises(RunError, match="answering models run with --executor local"):
        run(config, progress=False)
