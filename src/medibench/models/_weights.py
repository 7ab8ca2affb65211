"""Where a model's weights come from, checked before anything heavy is loaded.

Diffusers weights come from a local folder (``ip2p:/weights/ip2p``, a ``save_pretrained``
folder) or from the Hugging Face cache by repo id; with ``HF_HUB_OFFLINE=1`` (or
``local_files_only=True``) nothing is downloaded. A missing or incomplete folder is an error
naming the missing file. A ``transformers`` model (a VLM, a CLIP) is read from a local
``save_pretrained`` folder only (:func:`transformers_folder`, :func:`import_transformers`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType

__all__ = [
    "WeightsNotFoundError",
    "check_weights_folder",
    "hub_offline",
    "import_transformers",
    "resolve_weights",
    "transformers_folder",
]


class WeightsNotFoundError(FileNotFoundError):
    """Model weights that are not where they were looked for; the message names the file."""


def resolve_weights(
    path: str | os.PathLike | None, *, local_files_only: bool | None = None, model: str = ""
) -> Path | str:
    """A checked local weights folder, or a repo id ``from_pretrained`` may download.

    A path that exists must be a complete pipeline folder (:func:`check_weights_folder`). A repo
    id (``org/name``) is looked up in the Hugging Face cache; when offline and not cached, the
    error says where the files must go.
    """
    if path is None:
        raise WeightsNotFoundError(f"model '{model}' needs a weights folder: {model}:PATH")
    local = Path(path).expanduser()
    if local.exists():
        return check_weights_folder(local)
    text = str(path)
    is_repo_id = text.count("/") == 1 and not text.startswith((".", "/", "~"))
    if not is_repo_id:
        raise WeightsNotFoundError(f"weights folder {local} does not exist")
    offline = hub_offline() if local_files_only is None else local_files_only
    try:
        from huggingface_hub import snapshot_download

        cached = snapshot_download(text, local_files_only=True)
    except Exception:  # not in the cache (LocalEntryNotFoundError and friends)
        if not offline:
            return text  # from_pretrained downloads it
        from huggingface_hub.constants import HF_HUB_CACHE

        raise WeightsNotFoundError(
            f"weights '{text}' are not in the Hugging Face cache ({HF_HUB_CACHE}) and downloads "
            f"are off: run `hf download {text}` where there is network and copy the cache "
            f"there (or set HF_HOME), or give a local folder: {model or 'MODEL'}:/path/to/weights"
        ) from None
    return check_weights_folder(Path(cached))


def check_weights_folder(folder: Path) -> Path:
    """Check that ``folder`` holds a whole ``save_pretrained`` pipeline; return it.

    Raises :class:`WeightsNotFoundError` naming the first missing file: ``model_index.json``, a
    component's folder, its config, or its weights.
    """
    if folder.is_file():
        raise WeightsNotFoundError(single_file_message(folder))
    index = folder / "model_index.json"
    if not index.is_file():
        raise WeightsNotFoundError(
            f"incomplete weights folder {folder}: {index} is missing "
            "(a diffusers pipeline folder, as written by pipeline.save_pretrained)"
        )
    try:
        components = json.loads(index.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise WeightsNotFoundError(f"{index} is not valid JSON ({exc})") from None
    for key, value in components.items():
        if key.startswith("_") or not (isinstance(value, list) and len(value) == 2):
            continue
        library, cls = value
        if library is None or cls is None:
            continue
        sub = folder / key
        if not sub.is_dir():
            raise WeightsNotFoundError(
                f"incomplete weights folder {folder}: component folder {sub} ({cls}) is missing"
            )
        missing = _missing_component_file(sub, cls)
        if missing:
            raise WeightsNotFoundError(
                f"incomplete weights folder {folder}: {missing} ({cls}) is missing"
            )
    return folder


#: The first convolution of an original (CompVis/LDM) Stable Diffusion UNet: its input channels.
_LDM_CONV_IN = "model.diffusion_model.input_blocks.0.0.weight"


def single_file_message(path: Path) -> str:
    """Why ``path``, one file, is not a diffusers folder, and how to make it one.

    A checkpoint in the original Stable Diffusion layout (an LDM state dict, as InstructDiffusion
    and the original InstructPix2Pix release theirs) is named as such with its UNet's input
    channels (8: InstructPix2Pix-shaped, noise + image latents) and the diffusers script that
    converts it; any other file is named as not a folder.
    """
    channels = _ldm_input_channels(path)
    if channels is None:
        return (f"{path} is a file, not a diffusers pipeline folder (model_index.json plus one "
                "folder per component, as written by pipeline.save_pretrained)")  # fmt: skip
    shaped = " (InstructPix2Pix-shaped: noise + image latents)" if channels == 8 else ""
    return (
        f"{path} is a single-file checkpoint in the original Stable Diffusion (LDM) layout, "
        "not a diffusers pipeline folder (model_index.json plus one folder per component): "
        f"its UNet takes {channels} input channels{shaped}. Convert it once with diffusers' "
        f"scripts/convert_original_stable_diffusion_to_diffusers.py --checkpoint_path {path} "
        "--original_config_file CONFIG.yaml (the model's own, e.g. InstructDiffusion's "
        f"configs/instruct_diffusion.yaml) --num_in_channels {channels} --pipeline_class_name "
        "StableDiffusionInstructPix2PixPipeline --extract_ema --dump_path FOLDER, then give "
        "FOLDER (ip2p:FOLDER)"
    )


def _ldm_input_channels(path: Path) -> int | None:
    """The input channels of an LDM checkpoint's UNet (``.ckpt``/``.pt`` via torch with
    ``weights_only``, ``.safetensors`` via safetensors, memory-mapped), or None."""
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="pt") as f:
                if _LDM_CONV_IN not in set(f.keys()):
                    return None
                return int(f.get_slice(_LDM_CONV_IN).get_shape()[1])
        import torch

        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # a legacy (pre-zip) torch file cannot be memory-mapped
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # not a checkpoint either library reads: the plain message
        return None
    state = state.get("state_dict", state) if isinstance(state, dict) else {}
    weight = state.get(_LDM_CONV_IN) if isinstance(state, dict) else None
    return None if weight is None or weight.ndim != 4 else int(weight.shape[1])


def transformers_folder(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a ``transformers`` ``save_pretrained`` folder (it has a ``config.json``).

    Raises:
        WeightsNotFoundError: no ``config.json`` there; the message names the file and ``what``
            was looked for (``"CLIP model"``).
    """
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise WeightsNotFoundError(
            f"no {what} here: {folder / 'config.json'} does not exist (a save_pretrained folder "
            "is expected: config.json, weights, processor or tokenizer)"
        )
    return folder


def import_transformers(what: str) -> tuple[ModuleType, ModuleType]:
    """``(torch, transformers)``, or an ImportError saying that ``what`` needs them and what
    to install."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ImportError(
            f"{what} needs torch and transformers: pip install 'medibench[torch]' ({exc})"
        ) from None
    return torch, transformers


def hub_offline() -> bool:
    """Whether the environment turns Hugging Face downloads off (``HF_HUB_OFFLINE=1`` and kin)."""
    flags = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "DIFFUSERS_OFFLINE")
    return any(os.environ.get(f, "").strip().lower() in {"1", "true", "yes", "on"} for f in flags)


def _missing_component_file(sub: Path, cls: str) -> str | None:
    names = {p.name for p in sub.iterdir()}
    if cls.endswith("Scheduler"):
        return None if "scheduler_config.json" in names else str(sub / "scheduler_config.json")
    if "Tokenizer" in cls:
        known = {"tokenizer.json", "tokenizer_config.json", "vocab.json", "spiece.model"}
        return None if names & known else str(sub / "tokenizer_config.json")
    if "Processor" in cls or "FeatureExtractor" in cls:
        ok = "preprocessor_config.json" in names or "processor_config.json" in names
        return None if ok else str(sub / "preprocessor_config.json")
    if "config.json" not in names:
        return str(sub / "config.json")
    if not any(n.endswith((".safetensors", ".bin", ".index.json", ".gguf")) for n in names):
        return str(sub / "diffusion_pytorch_model.safetensors (or model.safetensors)")
    return None
