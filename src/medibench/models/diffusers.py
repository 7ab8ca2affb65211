"""Editing models from Hugging Face diffusers pipelines (extra ``medibench[torch]``).

- ``ip2p``: InstructPix2Pix (``StableDiffusionInstructPix2PixPipeline``);
- ``flux-kontext``: FLUX.1 Kontext (``FluxKontextPipeline``);
- ``qwen-image-edit``: Qwen-Image-Edit (``QwenImageEditPipeline``, diffusers >= 0.35);
- ``diffusers``: any image-conditioned pipeline through ``DiffusionPipeline`` (OmniGen2,
  Step1X-Edit, ... whatever the installed diffusers or the weights' custom code provides).

Weights come from a local folder (``ip2p:/weights/ip2p``, a ``save_pretrained`` folder) or from
the Hugging Face cache by repo id; with ``HF_HUB_OFFLINE=1`` (or ``local_files_only=True``)
nothing is downloaded. A missing or incomplete folder is an error naming the missing file.

Resolution, per model (outputs are stored at the size the model made them; resizing to the
reference is the protocol's job):

- ``ip2p``: the input is resized so its longer side is ``resolution`` (512, as the official
  ``edit_cli.py``) and both sides are rounded down to a multiple of 8; ``resolution=None`` keeps
  the input size (rounded down to a multiple of 8). The output has that working size.
- ``flux-kontext``: the pipeline picks the preferred Kontext resolution nearest the input's
  aspect ratio (about 1024x1024 pixels, sides multiples of 16) and returns that size.
- ``qwen-image-edit``: the pipeline resizes to about 1024x1024 pixels at the input's aspect
  ratio (sides multiples of 32) and returns that size.
- ``diffusers``: whatever the pipeline does; ``resolution`` resizes the input first as for ip2p
  (multiple of 16).

Seeds: each item's seed becomes ``torch.Generator(device).manual_seed(seed)``, so the same seed,
settings, device and ``batch_size`` give the same bytes. Batches (``batch_size > 1``, items of the
same size) give each item its own generator; batched and single runs agree to about 1e-6 before
rounding to uint8, so one pixel level can differ.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from medibench.models._base import as_rgb_uint8

__all__ = [
    "DiffusersEditModel",
    "DiffusionPipelineModel",
    "FluxKontextModel",
    "InstructPix2PixModel",
    "QwenImageEditModel",
    "WeightsNotFoundError",
    "check_weights_folder",
]

_INSTALL = "pip install 'medibench[torch]'"
_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}


class WeightsNotFoundError(FileNotFoundError):
    """Model weights that are not where they were looked for; the message names the file."""


class DiffusersEditModel:
    """Common machinery of the diffusers adapters: loading, devices, seeds, batches, sizes.

    Subclasses set :attr:`pipeline_class`, :attr:`default_weights`, :attr:`multiple_of`,
    :attr:`cuda_dtype` and :meth:`_call_options`.
    """

    pipeline_class: ClassVar[str] = "DiffusionPipeline"
    default_weights: ClassVar[str | None] = None
    multiple_of: ClassVar[int] = 8
    cuda_dtype: ClassVar[str] = "bfloat16"
    #: ``NAME:ARG`` on the command line fills this option.
    spec_argument: ClassVar[str] = "path"

    def __init__(
        self,
        path: str | None,
        *,
        name: str,
        device: str,
        dtype: str,
        steps: int,
        resolution: int | None,
        batch_size: int,
        local_files_only: bool | None,
        cpu_offload: bool,
        load_options: dict[str, Any] | None = None,
    ) -> None:
        torch = _import_torch()
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if resolution is not None and resolution < self.multiple_of:
            raise ValueError(f"resolution must be >= {self.multiple_of}, got {resolution}")
        self.name = name
        self.steps = int(steps)
        self.resolution = resolution
        self.batch_size = int(batch_size)
        self.device = _pick_device(torch, device)
        self.dtype = _pick_dtype(torch, dtype, self.device, self.cuda_dtype)
        self.weights = resolve_weights(
            path or self.default_weights, local_files_only=local_files_only, model=name
        )
        self.pipeline = self._load(torch, dict(load_options or {}), local_files_only)
        if cpu_offload:
            self.pipeline.enable_model_cpu_offload()
        else:
            self.pipeline.to(self.device)
        self.pipeline.set_progress_bar_config(disable=True)

    # -- the EditModel contract ---------------------------------------------------------------
    def edit(self, image: np.ndarray, instruction: str, *, seed: int) -> np.ndarray:
        """Edit one ``(H, W, 3)`` uint8 RGB image; see the module docstring for the size."""
        return self.edit_batch([image], [instruction], seeds=[seed])[0]

    def edit_batch(
        self, images: Sequence[np.ndarray], instructions: Sequence[str], *, seeds: Sequence[int]
    ) -> list[np.ndarray]:
        """Edit several images of the same size in one pipeline call, one generator per item."""
        if not (len(images) == len(instructions) == len(seeds)) or not images:
            raise ValueError("edit_batch needs as many images, instructions and seeds (>= 1)")
        torch = _import_torch()
        prepared = [self._prepare(as_rgb_uint8(im)) for im in images]
        if len({p.size for p in prepared}) > 1:
            sizes = [p.size for p in prepared]
            raise ValueError(f"edit_batch needs images of one size, got {sizes}")
        generators = [torch.Generator(self._generator_device()).manual_seed(int(s)) for s in seeds]
        kwargs = self._call_options()
        with torch.inference_mode():
            result = self.pipeline(
                prompt=list(instructions),
                image=prepared,
                generator=generators,
                output_type="np",
                **kwargs,
            )
        _raise_if_flagged(result)
        return [_to_uint8(x) for x in np.asarray(result.images)]

    # -- hooks ----------------------------------------------------------------------------------
    def _call_options(self) -> dict[str, Any]:
        return {"num_inference_steps": self.steps}

    def _pipeline_options(self) -> dict[str, Any]:
        return {}

    def _prepare(self, image: np.ndarray) -> Image.Image:
        """Resize to the model's working size (see the module docstring)."""
        h, w = image.shape[:2]
        m = self.multiple_of
        if self.resolution is not None:
            scale = self.resolution / max(h, w)
            h, w = round(h * scale), round(w * scale)
        size = (max(m, w // m * m), max(m, h // m * m))
        pil = Image.fromarray(image)
        return pil if pil.size == size else pil.resize(size, Image.Resampling.LANCZOS)

    # -- helpers --------------------------------------------------------------------------------
    def _load(self, torch, load_options: dict[str, Any], local_files_only: bool | None):
        import diffusers
        from diffusers.pipelines import pipeline_utils

        cls = getattr(diffusers, self.pipeline_class, None)
        if cls is None:
            raise ImportError(
                f"diffusers {diffusers.__version__} has no {self.pipeline_class}; upgrade it "
                f"(pip install -U diffusers) to run '{self.name}'"
            )
        # diffusers >= 0.36 calls it ``dtype``; older versions only know ``torch_dtype``.
        dtype_key = "dtype" if hasattr(pipeline_utils, "_resolve_dtype") else "torch_dtype"
        options = {
            dtype_key: self.dtype,
            "local_files_only": _offline() if local_files_only is None else local_files_only,
            **self._pipeline_options(),
            **load_options,
        }
        return cls.from_pretrained(str(self.weights), **options)

    def _generator_device(self) -> str:
        # With CPU offload the pipeline draws its noise where it runs: the accelerator.
        return self.device

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, weights={str(self.weights)!r})"


class InstructPix2PixModel(DiffusersEditModel):
    """InstructPix2Pix (Brooks et al. 2023) through ``StableDiffusionInstructPix2PixPipeline``.

    Args:
        path: a ``save_pretrained`` folder or a Hugging Face repo id
            (default ``timbrooks/instruct-pix2pix``).
        name: the name recorded in runs.
        device: ``"auto"`` (CUDA, then MPS, then CPU), or a torch device string.
        dtype: ``"auto"`` (float16 on CUDA, float32 elsewhere), ``"float32"``, ``"float16"``,
            ``"bfloat16"``.
        steps: denoising steps (100, as the official ``edit_cli.py``).
        guidance_scale: text guidance (7.5).
        image_guidance_scale: image guidance (1.5).
        negative_prompt: optional negative prompt.
        resolution: longer side of the working size in pixels (512); ``None`` keeps the input
            size. Sides are rounded down to a multiple of 8.
        batch_size: items of the same size edited in one call.
        safety_checker: run the Stable Diffusion safety checker (off by default: it blanks
            anatomy). When on, a flagged output raises ``ContentRefusedError``.
        local_files_only: never download (default: on when ``HF_HUB_OFFLINE`` is set).
        cpu_offload: ``enable_model_cpu_offload`` for small GPUs.
        load_options: extra ``from_pretrained`` keyword arguments (``variant``, ``revision``).
    """

    pipeline_class = "StableDiffusionInstructPix2PixPipeline"
    default_weights = "timbrooks/instruct-pix2pix"
    multiple_of = 8
    cuda_dtype = "float16"

    def __init__(
        self,
        path: str | None = None,
        *,
        name: str = "ip2p",
        device: str = "auto",
        dtype: str = "auto",
        steps: int = 100,
        guidance_scale: float = 7.5,
        image_guidance_scale: float = 1.5,
        negative_prompt: str | None = None,
        resolution: int | None = 512,
        batch_size: int = 1,
        safety_checker: bool = False,
        local_files_only: bool | None = None,
        cpu_offload: bool = False,
        load_options: dict[str, Any] | None = None,
    ) -> None:
        self.guidance_scale = float(guidance_scale)
        self.image_guidance_scale = float(image_guidance_scale)
        self.negative_prompt = negative_prompt
        self.safety_checker = bool(safety_checker)
        super().__init__(
            path,
            name=name,
            device=device,
            dtype=dtype,
            steps=steps,
            resolution=resolution,
            batch_size=batch_size,
            local_files_only=local_files_only,
            cpu_offload=cpu_offload,
            load_options=load_options,
        )

    def _pipeline_options(self) -> dict[str, Any]:
        if self.safety_checker:
            return {}
        return {"safety_checker": None, "requires_safety_checker": False}

    def _call_options(self) -> dict[str, Any]:
        return {
            "num_inference_steps": self.steps,
            "guidance_scale": self.guidance_scale,
            "image_guidance_scale": self.image_guidance_scale,
            **({"negative_prompt": self.negative_prompt} if self.negative_prompt else {}),
        }


class FluxKontextModel(DiffusersEditModel):
    """FLUX.1 Kontext [dev] through ``FluxKontextPipeline``.

    Args:
        path: a ``save_pretrained`` folder or a repo id
            (default ``black-forest-labs/FLUX.1-Kontext-dev``).
        steps: denoising steps (28). guidance_scale: distilled guidance (2.5, the model card's).
        max_area: the working area in pixels (1024 * 1024); the pipeline keeps the aspect ratio
            and snaps to its preferred Kontext resolutions.
        dtype: ``"auto"`` is bfloat16 on CUDA. Other options as :class:`InstructPix2PixModel`.
    """

    pipeline_class = "FluxKontextPipeline"
    default_weights = "black-forest-labs/FLUX.1-Kontext-dev"
    multiple_of = 16

    def __init__(
        self,
        path: str | None = None,
        *,
        name: str = "flux-kontext",
        device: str = "auto",
        dtype: str = "auto",
        steps: int = 28,
        guidance_scale: float = 2.5,
        max_area: int = 1024 * 1024,
        batch_size: int = 1,
        local_files_only: bool | None = None,
        cpu_offload: bool = False,
        load_options: dict[str, Any] | None = None,
    ) -> None:
        self.guidance_scale = float(guidance_scale)
        self.max_area = int(max_area)
        super().__init__(
            path,
            name=name,
            device=device,
            dtype=dtype,
            steps=steps,
            resolution=None,
            batch_size=batch_size,
            local_files_only=local_files_only,
            cpu_offload=cpu_offload,
            load_options=load_options,
        )

    def _prepare(self, image: np.ndarray) -> Image.Image:
        return Image.fromarray(image)  # the pipeline resizes (see the module docstring)

    def _call_options(self) -> dict[str, Any]:
        return {
            "num_inference_steps": self.steps,
            "guidance_scale": self.guidance_scale,
            "max_area": self.max_area,
        }


class QwenImageEditModel(DiffusersEditModel):
    """Qwen-Image-Edit through ``QwenImageEditPipeline`` (diffusers >= 0.35).

    Args:
        path: a ``save_pretrained`` folder or a repo id (default ``Qwen/Qwen-Image-Edit``).
        steps: denoising steps (50). true_cfg_scale: classifier-free guidance (4.0).
        negative_prompt: the model card's ``" "`` (true CFG needs one).
        Other options as :class:`InstructPix2PixModel`.
    """

    pipeline_class = "QwenImageEditPipeline"
    default_weights = "Qwen/Qwen-Image-Edit"
    multiple_of = 32

    def __init__(
        self,
        path: str | None = None,
        *,
        name: str = "qwen-image-edit",
        device: str = "auto",
        dtype: str = "auto",
        steps: int = 50,
        true_cfg_scale: float = 4.0,
        negative_prompt: str = " ",
        batch_size: int = 1,
        local_files_only: bool | None = None,
        cpu_offload: bool = False,
        load_options: dict[str, Any] | None = None,
    ) -> None:
        self.true_cfg_scale = float(true_cfg_scale)
        self.negative_prompt = negative_prompt
        super().__init__(
            path,
            name=name,
            device=device,
            dtype=dtype,
            steps=steps,
            resolution=None,
            batch_size=batch_size,
            local_files_only=local_files_only,
            cpu_offload=cpu_offload,
            load_options=load_options,
        )

    def _prepare(self, image: np.ndarray) -> Image.Image:
        return Image.fromarray(image)  # the pipeline resizes (see the module docstring)

    def _call_options(self) -> dict[str, Any]:
        return {
            "num_inference_steps": self.steps,
            "true_cfg_scale": self.true_cfg_scale,
            "negative_prompt": [self.negative_prompt],
        }

    def edit_batch(self, images, instructions, *, seeds):
        out = []  # the pipeline's negative prompt is per call: keep calls to one item
        for im, ins, s in zip(images, instructions, seeds, strict=True):
            out += super().edit_batch([im], [ins], seeds=[s])
        return out


class DiffusionPipelineModel(DiffusersEditModel):
    """Any image-conditioned editing pipeline, loaded with ``DiffusionPipeline.from_pretrained``.

    The pipeline is called as ``pipe(prompt=[...], image=[...], generator=[...],
    num_inference_steps=steps, output_type="np", **call_options)``.

    Args:
        path: a ``save_pretrained`` folder or a repo id (required).
        steps: denoising steps (28).
        guidance_scale: passed when set (else the pipeline's default).
        negative_prompt: passed when set.
        resolution: resize the input so its longer side is this (multiple of 16) before the call;
            ``None`` leaves sizing to the pipeline.
        call_options: extra keyword arguments of the pipeline call.
        trust_remote_code: allow the weights' own pipeline code (``custom_pipeline``).
        Other options as :class:`InstructPix2PixModel`.
    """

    multiple_of = 16

    def __init__(
        self,
        path: str,
        *,
        name: str = "diffusers",
        device: str = "auto",
        dtype: str = "auto",
        steps: int = 28,
        guidance_scale: float | None = None,
        negative_prompt: str | None = None,
        resolution: int | None = None,
        batch_size: int = 1,
        call_options: dict[str, Any] | None = None,
        trust_remote_code: bool = False,
        local_files_only: bool | None = None,
        cpu_offload: bool = False,
        load_options: dict[str, Any] | None = None,
    ) -> None:
        self.guidance_scale = guidance_scale
        self.negative_prompt = negative_prompt
        self.extra_call_options = dict(call_options or {})
        load = {"trust_remote_code": True} if trust_remote_code else {}
        load.update(load_options or {})
        super().__init__(
            path,
            name=name,
            device=device,
            dtype=dtype,
            steps=steps,
            resolution=resolution,
            batch_size=batch_size,
            local_files_only=local_files_only,
            cpu_offload=cpu_offload,
            load_options=load,
        )
        import inspect

        params = inspect.signature(self.pipeline.__call__).parameters
        if "image" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            raise TypeError(
                f"{type(self.pipeline).__name__} takes no 'image': not an image-editing pipeline"
            )

    def _prepare(self, image: np.ndarray) -> Image.Image:
        if self.resolution is None:
            return Image.fromarray(image)
        return super()._prepare(image)

    def _call_options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"num_inference_steps": self.steps}
        if self.guidance_scale is not None:
            opts["guidance_scale"] = self.guidance_scale
        if self.negative_prompt is not None:
            opts["negative_prompt"] = self.negative_prompt
        return {**opts, **self.extra_call_options}


# -- weights --------------------------------------------------------------------------------
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
    offline = _offline() if local_files_only is None else local_files_only
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


# -- torch helpers --------------------------------------------------------------------------
def _import_torch():
    try:
        import diffusers  # noqa: F401
        import torch
    except ImportError as exc:
        raise ImportError(
            f"diffusers models need torch and diffusers ({exc.name} is missing): {_INSTALL}"
        ) from exc
    return torch


def _pick_device(torch, device: str) -> str:
    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def _pick_dtype(torch, dtype: str, device: str, cuda_dtype: str):
    if dtype == "auto":
        dtype = cuda_dtype if device.startswith("cuda") else "float32"
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be auto or one of {sorted(set(_DTYPES))}, not {dtype!r}")
    return getattr(torch, _DTYPES[dtype])


def _offline() -> bool:
    flags = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "DIFFUSERS_OFFLINE")
    return any(os.environ.get(f, "").strip().lower() in {"1", "true", "yes", "on"} for f in flags)


def _to_uint8(x: np.ndarray) -> np.ndarray:
    # Diffusers' own numpy_to_pil rounding: [0, 1] floats -> round(x * 255).
    return np.clip(np.round(np.asarray(x, np.float32) * 255.0), 0, 255).astype(np.uint8)


def _raise_if_flagged(result: Any) -> None:
    flags = getattr(result, "nsfw_content_detected", None)
    if flags and any(flags):
        from medibench.models.api import ContentRefusedError

        raise ContentRefusedError("the pipeline's safety checker flagged the output")
