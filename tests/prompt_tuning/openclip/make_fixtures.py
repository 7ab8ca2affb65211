"""Writes the tiny OpenCLIP stand-ins beside this file, with OpenCLIP itself (not run by the
tests: open_clip needs torchvision, which medibench's torch pin excludes).

Run in a separate environment that has ``open_clip_torch``, ``timm`` and ``transformers``:
``python tests/prompt_tuning/openclip/make_fixtures.py``. Each folder is one of MVC-Bench's
OpenCLIP backbones made tiny (narrow widths, one or two layers), every weight random (BatchNorm
statistics included, so no branch is an identity), saved as OpenCLIP saves or reads it:

* ``rn50``, ``rn101``, ``vit-b-16``, ``vit-b-32``: OpenAI-format weights (a bare fp16 state
  dict, ``model.pt``; OpenCLIP infers the architecture from the shapes and uses QuickGELU);
* ``quiltnet`` (ViT-B/32, GELU) and ``biomedclip`` (timm ViT-B/16 trunk with a linear head, a
  BERT text tower pooled at [CLS] with an MLP projection): the Hugging Face hub layout,
  ``open_clip_config.json`` with ``open_clip_pytorch_model.bin`` / ``open_clip_model.safetensors``;

with tokenizer files (a character-level CLIP BPE vocabulary, or a character WordPiece vocabulary
for BERT) and ``reference.safetensors``: pixels, token ids as OpenCLIP's tokenizers pad them and
the image and text features OpenCLIP computes for them (float32).
"""

from __future__ import annotations

import json
from pathlib import Path

import open_clip
import timm
import torch
from open_clip.model import build_model_from_openai_state_dict
from safetensors.torch import save_file

HERE = Path(__file__).parent


def _char_vocab():
    """medibench's character vocabulary (``_tiny.py``, read alone: medibench need not import
    in OpenCLIP's environment)."""
    import importlib.util

    path = HERE.parents[2] / "src" / "medibench" / "prompt_tuning" / "_tiny.py"
    spec = importlib.util.spec_from_file_location("_tiny", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.char_vocab()


def write_clip_tokenizer(folder: Path) -> dict[str, int]:
    vocab = _char_vocab()
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "CLIPTokenizer",
                "model_max_length": 77,
                "bos_token": "<|startoftext|>",
                "eos_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>",
            }
        )
    )
    return vocab


def clip_ids(vocab: dict[str, int], texts: list[str], length: int) -> torch.Tensor:
    """What OpenCLIP's tokenizer does with this vocabulary: start, characters (the last of a
    word with ``</w>``), end, zeros to ``length``."""
    rows = []
    for text in texts:
        ids = [vocab["<|startoftext|>"]]
        for word in text.lower().split():
            ids += [vocab[c] for c in word[:-1]] + [vocab[word[-1] + "</w>"]]
        ids.append(vocab["<|endoftext|>"])
        rows.append(ids + [0] * (length - len(ids)))
    return torch.tensor(rows)


def write_config(folder: Path, cfg: dict) -> None:
    """``open_clip_config.json`` as the hub layout has it (OpenAI's mean and std)."""
    pre = {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711]}
    text = json.dumps({"model_cfg": cfg, "preprocess_cfg": pre}, indent=2)
    (folder / "open_clip_config.json").write_text(text)


def bert_vocab() -> list[str]:
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = [chr(c) for c in range(97, 123)] + list("0123456789")
    return words + chars + ["##" + c for c in chars] + list(".,-'")


def randomise(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.state_dict().items():
            if not p.is_floating_point():
                continue
            if name.endswith("running_var"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("logit_scale"):
                p.fill_(2.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.2)


TEXTS = ["a photo of a benign lesion.", "normal skin", "a photo of a malignant lesion."]


def reference(folder: Path, model, ids: torch.Tensor, image_size: int) -> None:
    model.eval()
    pixels = torch.randn(2, 3, image_size, image_size, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        image = model.encode_image(pixels)
        text = model.encode_text(ids)
    save_file(
        {
            "pixels": pixels.contiguous(),
            "ids": ids.contiguous(),
            "image_features": image.float().contiguous(),
            "text_features": text.float().contiguous(),
        },
        str(folder / "reference.safetensors"),
    )


def openai_format(name: str, vision: dict, seed: int) -> None:
    folder = HERE / name
    folder.mkdir(exist_ok=True)
    vocab = write_clip_tokenizer(folder)
    text = {"context_length": 77, "vocab_size": len(vocab), "width": 64, "heads": 1, "layers": 1}
    model = open_clip.model.CLIP(32, vision_cfg=vision, text_cfg=text, quick_gelu=True)
    randomise(model, seed)
    state = {k: v.half() for k, v in model.state_dict().items()}
    torch.save(state, folder / "model.pt")
    # what OpenCLIP builds from those weights, in float32, gives the reference
    rebuilt = build_model_from_openai_state_dict(dict(state), cast_dtype=torch.float32).float()
    reference(
        folder,
        rebuilt,
        clip_ids(vocab, TEXTS, 77),
        rebuilt.visual.image_size[0]
        if isinstance(rebuilt.visual.image_size, tuple)
        else rebuilt.visual.image_size,
    )


def hub_layout_vit(name: str, seed: int) -> None:
    folder = HERE / name
    folder.mkdir(exist_ok=True)
    vocab = write_clip_tokenizer(folder)
    cfg = {
        "embed_dim": 32,
        "vision_cfg": {
            "image_size": 64,
            "layers": 2,
            "width": 16,
            "head_width": 8,
            "patch_size": 32,
        },
        "text_cfg": {
            "context_length": 77,
            "vocab_size": len(vocab),
            "width": 32,
            "heads": 2,
            "layers": 2,
        },
    }
    model = open_clip.model.CLIP(**cfg)
    randomise(model, seed)
    write_config(folder, cfg)
    torch.save(
        {k: v.half() for k, v in model.state_dict().items()}, folder / "open_clip_pytorch_model.bin"
    )
    model.load_state_dict({k: v.half().float() for k, v in model.state_dict().items()})
    reference(folder, model, clip_ids(vocab, TEXTS, 77), 64)


def biomedclip(seed: int) -> None:
    folder = HERE / "biomedclip"
    folder.mkdir(exist_ok=True)
    import transformers

    words = bert_vocab()
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 64}
        )
    )
    bert = transformers.BertConfig(
        vocab_size=len(words),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    bert.save_pretrained(folder)
    cfg = {
        "embed_dim": 32,
        "vision_cfg": {
            "timm_model_name": "vit_base_patch16_224",
            "timm_model_pretrained": False,
            "timm_pool": "",
            "timm_proj": "linear",
            "image_size": 32,
        },
        "text_cfg": {
            "hf_model_name": str(folder),
            "hf_tokenizer_name": str(folder),
            "hf_proj_type": "mlp",
            "hf_pooler_type": "cls_last_hidden_state_pooler",
            "hf_model_pretrained": False,
            "context_length": 64,
        },
    }
    real_create = timm.create_model

    def tiny_vit(name, **kwargs):  # the named architecture, made narrow
        return real_create(name, img_size=32, embed_dim=64, depth=2, num_heads=1, **kwargs)

    open_clip.timm_model.timm.create_model = tiny_vit
    model = open_clip.model.CustomTextCLIP(**cfg)
    open_clip.timm_model.timm.create_model = real_create
    randomise(model, seed)
    saved = json.loads(json.dumps(cfg))
    name = "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract"
    saved["text_cfg"]["hf_model_name"] = saved["text_cfg"]["hf_tokenizer_name"] = name
    write_config(folder, saved)
    state = {k: v.half().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "open_clip_model.safetensors"))
    model.load_state_dict({k: v.float() for k, v in state.items()})
    index = {w: i for i, w in enumerate(words)}
    rows = []
    for text in TEXTS:
        ids = [index["[CLS]"]]
        for word in text.lower().replace(".", " .").split():
            ids += [index[word[0]]] + [index["##" + c] for c in word[1:]]
        ids.append(index["[SEP]"])
        rows.append(ids + [0] * (64 - len(ids)))
    reference(folder, model, torch.tensor(rows), 32)


def main() -> None:
    torch.manual_seed(0)
    openai_format(
        "rn50", {"layers": [1, 1, 1, 1], "width": 4, "image_size": 32, "patch_size": None}, 1
    )
    openai_format(
        "rn101", {"layers": [1, 1, 2, 1], "width": 4, "image_size": 32, "patch_size": None}, 2
    )
    openai_format("vit-b-16", {"layers": 2, "width": 64, "patch_size": 16, "image_size": 32}, 3)
    openai_format("vit-b-32", {"layers": 1, "width": 64, "patch_size": 32, "image_size": 32}, 4)
    hub_layout_vit("quiltnet", 5)
    biomedclip(6)


if __name__ == "__main__":
    main()
