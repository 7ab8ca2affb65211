"""``--backbone open_clip:SPEC``: OpenCLIP checkpoints without OpenCLIP (which needs
torchvision, excluded by medibench's torch pin), built by :mod:`._openclip_towers`.

``SPEC`` is one of:

* a folder in OpenCLIP's Hugging Face hub layout: ``open_clip_config.json`` (``model_cfg``,
  ``preprocess_cfg``) and ``open_clip_model.safetensors`` or ``open_clip_pytorch_model.bin``
  (BiomedCLIP, QuiltNet);
* ``hf-hub:ORG/NAME``: that folder from the local Hugging Face cache (nothing is downloaded);
* a weights file in OpenAI's format (``RN50.pt``, ``ViT-B-16.pt``: a state dict, or OpenAI's
  TorchScript archive), the architecture read from the tensor shapes as OpenCLIP's
  ``build_model_from_openai_state_dict`` does (ViT when ``visual.proj`` exists; ResNet blocks
  counted per stage; heads = width / 64; QuickGELU).

The tokenizer is a ``transformers`` tokenizer saved beside the weights (``vocab.json`` +
``merges.txt`` for CLIP's BPE, ``vocab.txt`` for BERT) or, for ``hf_tokenizer_name``, found in
the local Hugging Face cache; BiomedCLIP's BERT config is the folder's ``config.json`` or the
cached config of ``hf_model_name``. Deviation: OpenCLIP's own CLIP tokenizer (``ftfy`` text
clean-up, its gzipped BPE file) is not used; transformers' ``CLIPTokenizer`` with OpenAI's
vocabulary gives the same ids for ordinary text. The timm ViT's heads are width / 64 (every
timm ``vit_*`` model's head width).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import torch

from medibench.prompt_tuning._openclip_towers import (
    BertTextTower,
    ModifiedResNet,
    TextTransformer,
    TimmVisionTransformer,
    VisionTransformer,
)

__all__ = ["load_openclip"]

WEIGHT_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
_TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt")
#: Non-parameter entries of saved CLIP state dicts (OpenAI's archive keeps the first three).
_EXTRA_KEYS = {
    "input_resolution",
    "context_length",
    "vocab_size",
    "attn_mask",
    "logit_scale",
    "logit_bias",
}
#: Settings a config may only leave at OpenCLIP's default (what MVC-Bench's backbones use).
_VISION_DEFAULTS = {
    "ls_init_value": None,
    "attentional_pool": False,
    "no_ln_pre": False,
    "pos_embed_type": "learnable",
    "final_ln_after_pool": False,
    "pool_type": "tok",
    "block_type": None,
    "qk_norm": False,
    "scaled_cosine_attn": False,
    "act_kwargs": None,
    "norm_kwargs": None,
    "timm_proj_bias": False,
}
_TEXT_DEFAULTS = {
    "ls_init_value": None,
    "embed_cls": False,
    "no_causal_mask": False,
    "final_ln_after_pool": False,
    "pool_type": "argmax",
    "proj_bias": False,
    "proj_type": "linear",
    "act_kwargs": None,
    "norm_kwargs": None,
}


def load_openclip(rest: str, spec: str) -> dict[str, Any]:
    """The towers, tokenizer and logit scale of ``open_clip:rest`` (module doc), as the keyword
    arguments of :class:`._backbone.Backbone` (less ``spec`` and ``family``).

    Raises:
        ValueError: a missing folder, file or tokenizer, unreadable weights, a config setting
            medibench does not build, weights that do not fit the architecture.
    """
    folder, weights, config = _resolve(rest, spec)
    state = _read_weights(weights)
    if config is None:
        config = {"model_cfg": _openai_config(state, weights), "preprocess_cfg": {}}
    cfg = config.get("model_cfg")
    if not isinstance(cfg, dict) or "vision_cfg" not in cfg or "text_cfg" not in cfg:
        raise ValueError(
            f"{folder / 'open_clip_config.json'}: no model_cfg with vision_cfg and text_cfg"
        )
    pre = config.get("preprocess_cfg") or {}
    image = _vision(cfg, pre, state, weights)
    text = _text(cfg, folder, weights)
    custom = bool(cfg["text_cfg"].get("hf_model_name"))
    _load(image, state, "visual.", weights)
    _load(text, state, "text." if custom else "", weights, exclude="visual.")
    tokenizer = _tokenizer(folder, cfg["text_cfg"].get("hf_tokenizer_name"), spec)
    if "logit_scale" not in state:
        raise ValueError(f"{weights}: no logit_scale tensor")
    bias = float(state["logit_bias"]) if "logit_bias" in state else 0.0
    return {
        "image": image,
        "text": text,
        "tokenizer": tokenizer,
        "log_scale": float(state["logit_scale"]),
        "bias": bias,
    }


def _resolve(rest: str, spec: str) -> tuple[Path, Path, dict | None]:
    if rest.startswith("hf-hub:"):
        folder = _cached_repo(rest.removeprefix("hf-hub:"), spec)
    else:
        folder = Path(rest)
    if folder.is_file():
        return folder.parent, folder, None
    if not folder.is_dir():
        hint = ""
        if re.fullmatch(r"[A-Za-z0-9][\w.-]*", rest) and "." not in rest:
            hint = (
                " (OpenCLIP's built-in names download their weights; give the downloaded "
                "weights file or hub folder)"
            )
        raise ValueError(f"--backbone {spec!r}: {folder}: no such file or folder{hint}")
    config_path = folder / "open_clip_config.json"
    if not config_path.is_file():
        raise ValueError(
            f"--backbone {spec!r}: {folder} has no open_clip_config.json; give a folder in "
            "OpenCLIP's hub layout or an OpenAI-format weights file"
        )
    try:
        config = json.loads(config_path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{config_path}: does not read as JSON ({exc})") from None
    for name in WEIGHT_FILES:
        if (folder / name).is_file():
            return folder, folder / name, config
    raise ValueError(f"{folder}: no weights ({' or '.join(WEIGHT_FILES)})")


def _cached_repo(repo: str, spec: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo, local_files_only=True))
    except Exception as exc:  # every hub error means the same here: not cached
        raise ValueError(
            f"--backbone {spec!r}: {repo} is not in the local Hugging Face cache "
            f"({type(exc).__name__}); download it first or give its folder"
        ) from None


def _read_weights(path: Path) -> dict[str, torch.Tensor]:
    state: Any
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        elif _is_torchscript(path):  # OpenAI's own files
            state = torch.jit.load(str(path), map_location="cpu").state_dict()
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a damaged file of any kind is named, not a traceback
        raise ValueError(f"{path}: the weights do not read ({type(exc).__name__}: {exc})") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path}: not a state dict of tensors")
    return {k.removeprefix("module."): v.float() for k, v in state.items()}


def _is_torchscript(path: Path) -> bool:
    """A TorchScript archive: a zip with ``constants.pkl`` (a ``torch.save`` zip has none)."""
    import zipfile

    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any(name.endswith("/constants.pkl") for name in archive.namelist())


def _openai_config(state: dict[str, torch.Tensor], path: Path) -> dict[str, Any]:
    """OpenCLIP's ``model_cfg`` of OpenAI-format weights, from the tensor shapes."""
    try:
        if "visual.proj" in state:
            conv = state["visual.conv1.weight"]
            grid = round(math.sqrt(state["visual.positional_embedding"].shape[0] - 1))
            blocks = [
                k for k in state if k.startswith("visual.") and k.endswith(".attn.in_proj_weight")
            ]
            vision: dict[str, Any] = {
                "layers": len(blocks),
                "width": conv.shape[0],
                "patch_size": conv.shape[-1],
                "image_size": conv.shape[-1] * grid,
            }
        else:
            counts = [
                len({k.split(".")[2] for k in state if k.startswith(f"visual.layer{b}.")})
                for b in range(1, 5)
            ]
            side = round(math.sqrt(state["visual.attnpool.positional_embedding"].shape[0] - 1))
            vision = {
                "layers": counts,
                "width": state["visual.layer1.0.conv1.weight"].shape[0],
                "image_size": side * 32,
            }
        width = state["ln_final.weight"].shape[0]
        text = {
            "context_length": state["positional_embedding"].shape[0],
            "vocab_size": state["token_embedding.weight"].shape[0],
            "width": width,
            "heads": width // 64,
            "layers": len(
                {k.split(".")[2] for k in state if k.startswith("transformer.resblocks.")}
            ),
        }
        embed = state["text_projection"].shape[1]
    except KeyError as exc:
        raise ValueError(f"{path}: not OpenAI-format CLIP weights (no {exc.args[0]})") from None
    return {"embed_dim": embed, "vision_cfg": vision, "text_cfg": text, "quick_gelu": True}


def _vision(cfg: dict, pre: dict, state: dict, path: Path):
    v, embed = cfg["vision_cfg"], int(cfg["embed_dim"])
    _check_defaults(v, _VISION_DEFAULTS, "vision_cfg", path)
    mean, std = pre.get("mean", OPENAI_MEAN), pre.get("std", OPENAI_STD)
    size = v.get("image_size", 224)
    if isinstance(size, (list, tuple)):
        if len(set(size)) != 1:
            raise ValueError(f"{path}: vision_cfg.image_size {size} is not square")
        size = size[0]
    if v.get("timm_model_name"):
        name = str(v["timm_model_name"])
        if (
            not name.startswith("vit_")
            or v.get("timm_pool", "avg") not in ("", "token")
            or v.get("timm_proj", "linear") != "linear"
        ):
            raise ValueError(
                f"{path}: timm tower {name!r} (pool {v.get('timm_pool')!r}, proj "
                f"{v.get('timm_proj')!r}) is not a ViT with class-token pooling and a linear head"
            )
        key = "visual.trunk.patch_embed.proj.weight"
        if key not in state:
            raise ValueError(f"{path}: no {key} for the timm ViT {name!r}")
        conv = state[key]
        layers = len({k.split(".")[3] for k in state if k.startswith("visual.trunk.blocks.")})
        return TimmVisionTransformer(
            image_size=size,
            patch_size=conv.shape[-1],
            width=conv.shape[0],
            layers=layers,
            heads=max(1, conv.shape[0] // 64),
            embed_dim=embed,
            mean=mean,
            std=std,
        )
    head_width = int(v.get("head_width", 64))
    if isinstance(v.get("layers"), (list, tuple)):
        width = int(v.get("width", 64))
        return ModifiedResNet(
            layers=list(v["layers"]),
            width=width,
            heads=width * 32 // head_width,
            image_size=size,
            embed_dim=embed,
            mean=mean,
            std=std,
        )
    width = int(v.get("width", 768))
    return VisionTransformer(
        image_size=size,
        patch_size=int(v.get("patch_size", 16)),
        width=width,
        layers=int(v.get("layers", 12)),
        heads=width // head_width,
        embed_dim=embed,
        mean=mean,
        std=std,
        mlp_ratio=float(v.get("mlp_ratio", 4.0)),
        quick_gelu=bool(cfg.get("quick_gelu", False)),
    )


def _text(cfg: dict, folder: Path, path: Path):
    t, embed = cfg["text_cfg"], int(cfg["embed_dim"])
    if t.get("hf_model_name"):
        pooler = t.get("hf_pooler_type", "cls_last_hidden_state_pooler")
        if pooler != "cls_last_hidden_state_pooler":
            raise ValueError(
                f"{path}: text_cfg.hf_pooler_type {pooler!r} is not built "
                "(cls_last_hidden_state_pooler is)"
            )
        config = _bert_config(folder, str(t["hf_model_name"]))
        return BertTextTower(config, embed, str(t.get("hf_proj_type", "mlp")))
    _check_defaults(t, _TEXT_DEFAULTS, "text_cfg", path)
    return TextTransformer(
        context_length=int(t.get("context_length", 77)),
        vocab_size=int(t.get("vocab_size", 49408)),
        width=int(t.get("width", 512)),
        heads=int(t.get("heads", 8)),
        layers=int(t.get("layers", 12)),
        embed_dim=embed,
        mlp_ratio=float(t.get("mlp_ratio", 4.0)),
        quick_gelu=bool(cfg.get("quick_gelu", False)),
    )


def _bert_config(folder: Path, name: str):
    import transformers

    local = folder / "config.json"
    try:
        source = str(folder) if local.is_file() else name
        config = transformers.AutoConfig.from_pretrained(source, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"{folder}: the text tower's config: no config.json beside open_clip_config.json and "
            f"{name!r} is not in the local Hugging Face cache ({type(exc).__name__}); save "
            "AutoConfig.from_pretrained(hf_model_name) there"
        ) from None
    if config.model_type != "bert":
        raise ValueError(f"{local}: model_type {config.model_type!r}; the text tower built is BERT")
    return config


def _check_defaults(cfg: dict, defaults: dict, where: str, path: Path) -> None:
    for key, default in defaults.items():
        if key in cfg and cfg[key] != default and not (default is None and cfg[key] in ({}, None)):
            raise ValueError(f"{path}: {where}.{key}={cfg[key]!r} is not built (only {default!r})")


def _load(module, state: dict, prefix: str, path: Path, exclude: str | None = None) -> None:
    part = {
        k.removeprefix(prefix): v
        for k, v in state.items()
        if k.startswith(prefix)
        and (exclude is None or not k.startswith(exclude))
        and k.removeprefix(prefix) not in _EXTRA_KEYS
    }
    own = module.state_dict()
    missing = sorted(set(own) - set(part))
    unexpected = sorted(set(part) - set(own))
    if isinstance(module, BertTextTower):  # buffers transformers makes itself
        missing = [k for k in missing if not k.endswith(("position_ids", "token_type_ids"))]
        part = {k: v for k, v in part.items() if k in own}
    if missing or unexpected:
        raise ValueError(
            f"{path}: the weights do not fit the architecture: missing {missing[:4]}, "
            f"unexpected {[prefix + k for k in unexpected[:4]]}"
        )
    for key, value in part.items():
        if own[key].shape != value.shape:
            raise ValueError(
                f"{path}: {prefix}{key} has shape {tuple(value.shape)}, the architecture "
                f"{tuple(own[key].shape)}"
            )
    module.load_state_dict(part, strict=False)


def _tokenizer(folder: Path, hf_name: str | None, spec: str):
    import transformers

    have = [n for n in _TOKENIZER_FILES if (folder / n).is_file()]
    source = str(folder) if have else hf_name
    if source is None:
        raise ValueError(
            f"--backbone {spec!r}: no tokenizer in {folder} (one of "
            f"{', '.join(_TOKENIZER_FILES)}); save the model's transformers tokenizer there "
            "(CLIP's: vocab.json and merges.txt)"
        )
    try:
        return transformers.AutoTokenizer.from_pretrained(source, local_files_only=True)
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(
            f"--backbone {spec!r}: the tokenizer {source} does not load ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None
