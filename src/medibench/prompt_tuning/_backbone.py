"""Backbones for prompt tuning: a frozen image tower, a frozen text tower and a tokenizer.

``--backbone`` is one of:

* ``clip:PATH`` / ``siglip:PATH``: a ``transformers`` ``CLIPModel`` / ``SiglipModel`` saved with
  ``save_pretrained`` (with its tokenizer and image processor) in ``PATH``; medical CLIPs
  exported to these formats load the same way. ``hf:PATH`` reads the family from the folder's
  ``config.json`` (``model_type``). Nothing is downloaded (``local_files_only``).
* ``open_clip:PATH`` / ``open_clip:hf-hub:ORG/NAME``: an OpenCLIP checkpoint (OpenAI CLIP
  RN50, RN101, ViT-B/16, ViT-B/32 in OpenAI's weights format; BiomedCLIP, QuiltNet in the hub
  layout), built without OpenCLIP (:mod:`._openclip`).
* ``medclip:PATH``: MedCLIP needs its own package (``pip install medclip``), which needs
  torchvision; medibench has no adapter for it, and says so.
* ``module:callable``: a function (no arguments) returning ``(image_tower, text_tower,
  tokenizer)`` or those plus ``logit_scale`` (the multiplier of the cosine, default 100, CLIP's
  trained value) and ``logit_bias`` (default 0) as floats; the towers meet the
  contract in :mod:`medibench.prompt_tuning._towers`; the tokenizer is a ``transformers``
  tokenizer (called as ``tokenizer(text)`` and ``tokenizer(text, add_special_tokens=False)``).

Every parameter of a backbone is frozen (``requires_grad=False``, eval mode);
:func:`fingerprint` hashes them, so a run can show that training left them unchanged.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from medibench.prompt_tuning._towers import HFImageTower, HFTextTower

__all__ = ["Backbone", "fingerprint", "load_backbone"]

_FAMILIES = {"clip": "CLIPModel", "siglip": "SiglipModel"}
#: A saved tokenizer has one of these (fast, BPE or SentencePiece); without them transformers
#: builds an empty tokenizer silently.
_TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "spiece.model", "tokenizer.model")


@dataclass
class Backbone:
    """A frozen two-tower model: ``logits = exp(log_scale) * cos(image, text) + bias``."""

    image: Any
    text: Any
    tokenizer: Any
    log_scale: float
    bias: float
    spec: str
    family: str

    @property
    def scale(self) -> float:
        return math.exp(self.log_scale)


def load_backbone(spec: str) -> Backbone:
    """Load and freeze the backbone ``spec`` (module doc).

    Raises:
        ValueError: an unknown family, a folder that does not load, a callable returning
            something else than the towers and a tokenizer.
    """
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in ("clip", "siglip", "hf"):
        backbone = _load_hf(Path(rest), prefix, spec)
    elif sep and prefix == "open_clip":
        from medibench.prompt_tuning._openclip import load_openclip

        backbone = Backbone(**load_openclip(rest, spec), spec=spec, family="open_clip")
    elif sep and prefix == "medclip":
        raise ValueError(_medclip_message(spec))
    elif sep and rest and "/" not in prefix:
        backbone = _load_callable(prefix, rest, spec)
    else:
        raise ValueError(
            f"--backbone {spec!r}: expected clip:PATH, siglip:PATH, hf:PATH, open_clip:PATH, "
            "open_clip:hf-hub:NAME or module:callable"
        )
    for tower in (backbone.image, backbone.text):
        if isinstance(tower, torch.nn.Module):
            tower.eval()
            tower.requires_grad_(False)
    return backbone


def fingerprint(backbone: Backbone) -> str:
    """SHA-256 over every tensor of both towers (names and bytes), in name order."""
    h = hashlib.sha256()
    for side, tower in (("image", backbone.image), ("text", backbone.text)):
        if not isinstance(tower, torch.nn.Module):
            continue
        state = tower.state_dict()
        for name in sorted(state):
            h.update(f"{side}.{name}".encode())
            h.update(state[name].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _load_hf(path: Path, family: str, spec: str) -> Backbone:
    from medibench.models._weights import import_transformers, transformers_folder

    folder = transformers_folder(path, "CLIP-family model")
    _, transformers = import_transformers("prompt tuning")
    model_type = _model_type(folder)
    if family == "hf":
        if model_type not in _FAMILIES:
            raise ValueError(
                f"{folder / 'config.json'}: model_type {model_type!r} is not a two-tower family "
                f"medibench opens up ({', '.join(_FAMILIES)}); use module:callable for others"
            )
        family = model_type
    elif model_type in _FAMILIES and model_type != family:
        raise ValueError(
            f"--backbone {spec!r}: {folder / 'config.json'} is a {model_type} model, not "
            f"{family}; use {model_type}:{path}"
        )
    tokenizer_files = [n for n in _TOKENIZER_FILES if (folder / n).is_file()]
    if not tokenizer_files:
        raise ValueError(
            f"{folder}: no tokenizer files (one of {', '.join(_TOKENIZER_FILES)}); save the "
            "model's tokenizer beside it (tokenizer.save_pretrained)"
        )
    from safetensors import SafetensorError

    try:
        model = getattr(transformers, _FAMILIES[family]).from_pretrained(
            folder, local_files_only=True
        )
    except SafetensorError as exc:
        raise ValueError(f"{folder}: its weights (*.safetensors) do not read: {exc}") from None
    except (OSError, ValueError, TypeError, RuntimeError) as exc:
        raise ValueError(f"{folder}: cannot load a {family} model: {_first_line(exc)}") from None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
        processor = transformers.AutoImageProcessor.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(
            f"{folder}: cannot load the tokenizer and image processor: {_first_line(exc)}"
        ) from None
    model.eval()
    bias = float(model.logit_bias.detach()) if family == "siglip" else 0.0
    return Backbone(
        image=HFImageTower(model, family, processor),
        text=HFTextTower(model, family),
        tokenizer=tokenizer,
        log_scale=float(model.logit_scale.detach()),
        bias=bias,
        spec=spec,
        family=family,
    )


def _load_callable(module: str, name: str, spec: str) -> Backbone:
    from medibench.registry import import_object

    try:
        factory = import_object(f"{module}:{name}")
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--backbone {spec!r}: cannot import {module}:{name} ({exc})") from None
    try:
        out = factory()
    except Exception as exc:  # the user's code: any failure is named, not a traceback
        raise ValueError(
            f"--backbone {spec!r}: {module}:{name}() raised {type(exc).__name__}: "
            f"{_first_line(exc)}"
        ) from None
    if not isinstance(out, tuple) or len(out) not in (3, 4, 5):
        raise ValueError(
            f"--backbone {spec!r}: the callable must return (image_tower, text_tower, tokenizer"
            f"[, logit_scale[, logit_bias]]), got {type(out).__name__}"
        )
    image, text, tokenizer = out[:3]
    for what, obj, need in (
        ("image tower", image, ("preprocess", "width", "depth")),
        ("text tower", text, ("embed", "width", "depth", "max_length", "pad_to_max")),
    ):
        missing = [a for a in need if not hasattr(obj, a)]
        if missing:
            raise ValueError(f"--backbone {spec!r}: the {what} has no {', '.join(missing)}")
    scale = float(out[3]) if len(out) > 3 else 100.0  # CLIP's trained value, exp(4.6052)
    if not scale > 0:
        raise ValueError(f"--backbone {spec!r}: logit_scale must be > 0, got {scale}")
    return Backbone(
        image,
        text,
        tokenizer,
        math.log(scale),
        float(out[4]) if len(out) > 4 else 0.0,
        spec,
        "callable",
    )


def _medclip_message(spec: str) -> str:
    import importlib.util

    if importlib.util.find_spec("medclip") is None:
        return (
            f"--backbone {spec!r}: MedCLIP loads through its own package: pip install medclip "
            "(it needs torchvision, which medibench's torch pin excludes); then wrap it as "
            "module:callable"
        )
    return (
        f"--backbone {spec!r}: medclip is installed, but medibench has no MedCLIP adapter; "
        "wrap its towers as module:callable (the contract in medibench.prompt_tuning._towers)"
    )


def _model_type(folder: Path) -> str | None:
    try:
        config = json.loads((folder / "config.json").read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{folder / 'config.json'}: does not read as JSON ({exc})") from None
    return config.get("model_type") if isinstance(config, dict) else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
