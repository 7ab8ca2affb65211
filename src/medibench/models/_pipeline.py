"""The machinery every diffusers model shares: loading, devices, dtypes, seeds, batches, sizes.

Seeds: each item's seed becomes ``torch.Generator(device).manual_seed(seed)``, so the same seed,
settings, device and ``batch_size`` give the same bytes. Batches (``batch_size > 1``, items of the
same size) give each item its own generator; batched and single runs agree to about 1e-6 before
rounding to uint8, so one pixel level can differ.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, TypedDict

import numpy as np
from PIL import Image

from medibench.models._base import SharedOptions, as_rgb_uint8
from medibench.models._errors import ContentRefusedError, UnsupportedPipelineError
from medibench.models._processors import has_torchvision
from medibench.models._weights import hub_offline, resolve_weights

__all__ = ["KNOWN_PIPELINES", "DiffusersEditModel", "PipelineOptions", "check_pipeline_class"]

_BUILD = "medibench build modification --inpainter diffusers-inpaint:PATH"
#: The diffusers pipelines medibench knows, and what runs each (PATH: the weights folder).
KNOWN_PIPELINES = {
    "StableDiffusionInstructPix2PixPipeline": "ip2p:PATH",
    "StableDiffusionXLInstructPix2PixPipeline": "diffusers:PATH",
    "FluxKontextPipeline": "flux-kontext:PATH",
    "StableDiffusionPipeline": "imagic:PATH",
    "QwenImageEditPipeline": "qwen-image-edit:PATH",
    "QwenImageEditPlusPipeline": "qwen-image-edit:PATH",
    "StableDiffusionInpaintPipeline": _BUILD,
    "StableDiffusionXLInpaintPipeline": _BUILD,
    "FluxFillPipeline": _BUILD,
    "FluxInpaintPipeline": _BUILD,
}

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


class PipelineOptions(TypedDict, total=False):
    """The options every diffusers model takes besides its own (defaults: ``__init__`` below).

    ``device``: ``"auto"`` (CUDA, then MPS, then CPU) or a torch device string; ``dtype``:
    ``"auto"`` (bfloat16 on a CUDA GPU that supports it, the model's ``cuda_dtype`` on one that
    does not, float32 elsewhere), ``"float32"``,
    ``"float16"``, ``"bfloat16"``; ``batch_size``: items of the same size edited in one call;
    ``local_files_only``: never download (default: on when ``HF_HUB_OFFLINE`` is set);
    ``cpu_offload``: ``enable_model_cpu_offload`` for small GPUs; ``load_options``: extra
    ``from_pretrained`` keyword arguments (``variant``, ``revision``); ``lora``: LoRA weights
    (a folder or ``.safetensors`` file that ``load_lora_weights`` reads, a ``medibench train``
    checkpoint) applied at ``lora_scale``.
    """

    device: str
    dtype: str
    batch_size: int
    local_files_only: bool | None
    cpu_offload: bool
    load_options: dict[str, Any] | None
    lora: str | None
    lora_scale: float


class DiffusersEditModel(SharedOptions):
    """Common machinery of the diffusers adapters: loading, devices, seeds, batches, sizes.

    Subclasses set :attr:`pipeline_class`, :attr:`default_weights`, :attr:`multiple_of`,
    :attr:`cuda_dtype` and :attr:`call_attributes` (or extend :meth:`_call_options`). A
    subclass's ``__init__`` takes its own options and ``**common: Unpack[PipelineOptions]``,
    passed on to this one; the class's signature lists both (what ``medibench models`` shows
    and model specs are checked against).
    """

    common_options = PipelineOptions

    pipeline_class: ClassVar[str] = "DiffusionPipeline"
    default_weights: ClassVar[str | None] = None
    multiple_of: ClassVar[int] = 8
    #: the pipeline resizes its input itself (FLUX Kontext, Qwen-Image-Edit, generic pipelines)
    pipeline_resizes: ClassVar[bool] = False
    #: the ``dtype="auto"`` of a CUDA GPU without bfloat16 (one with it runs bfloat16)
    cuda_dtype: ClassVar[str] = "bfloat16"
    #: the attributes the pipeline call takes under their own names (each passed when not None)
    call_attributes: ClassVar[tuple[str, ...]] = ()
    #: an editing model (an inpainting pipeline is refused); the build's inpainter is not one
    edits: ClassVar[bool] = True
    #: ``NAME:ARG`` on the command line fills this option.
    spec_argument: ClassVar[str] = "path"

    def __init__(
        self,
        path: str | None,
        *,
        name: str,
        steps: int,
        resolution: int | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 1,
        local_files_only: bool | None = None,
        cpu_offload: bool = False,
        load_options: dict[str, Any] | None = None,
        lora: str | None = None,
        lora_scale: float = 1.0,
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
        self.lora, self.lora_scale = (None if lora is None else str(lora)), float(lora_scale)
        if self.lora is not None:
            self._load_lora()
        self.cpu_offload = bool(cpu_offload)
        if cpu_offload:
            self.pipeline.enable_model_cpu_offload()
        else:
            self.pipeline.to(self.device)
        self.pipeline.set_progress_bar_config(disable=True)

    # -- the EditModel contract ---------------------------------------------------------------
    def edit(self, image: np.ndarray, instruction: str, *, seed: int) -> np.ndarray:
        """Edit one ``(H, W, 3)`` uint8 RGB image.

        The output size is the model's (see :mod:`medibench.models.diffusers`).
        """
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
        kwargs = {**self._call_options(len(prepared)), **self._size_options(*prepared[0].size)}
        with torch.inference_mode():
            result = self.pipeline(
                prompt=self._prompts(list(instructions)),
                image=prepared,
                generator=generators,
                output_type="np",
                **kwargs,
            )
        _raise_if_flagged(result)
        return [self._finish(_to_uint8(x)) for x in np.asarray(result.images)]

    # -- hooks ----------------------------------------------------------------------------------
    def _prompts(self, instructions: list[str]) -> list[str]:
        """The pipeline's prompts for ``instructions`` (the instructions themselves; ICEdit
        puts each in its diptych template)."""
        return instructions

    def _finish(self, image: np.ndarray) -> np.ndarray:
        """The output from the pipeline's uint8 image (itself; ICEdit keeps its right half)."""
        return image

    def _call_options(self, batch: int = 1) -> dict[str, Any]:
        """The pipeline call's keyword arguments for ``batch`` items: the steps and each of
        :attr:`call_attributes` that is set; a subclass may add others to these."""
        options: dict[str, Any] = {"num_inference_steps": self.steps}
        for attr in self.call_attributes:
            if (value := getattr(self, attr)) is not None:
                options[attr] = value
        return options

    def _size_options(self, width: int, height: int) -> dict[str, Any]:
        """Call arguments that make the pipeline work at the prepared image's size (pixels);
        none by default (the pipeline's own sizing)."""
        return {}

    def _pipeline_options(self) -> dict[str, Any]:
        return {}

    def _prepare(self, image: np.ndarray) -> Image.Image:
        """Resize to the model's working size (see :mod:`medibench.models.diffusers`); a
        pipeline that resizes by itself gets the image as it is unless a resolution is set."""
        if self.pipeline_resizes and self.resolution is None:
            return Image.fromarray(image)
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

        check_pipeline_class(self.weights, self.pipeline_class, editing=self.edits)
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
            "local_files_only": hub_offline() if local_files_only is None else local_files_only,
            **self._pipeline_options(),
            **load_options,
        }
        try:
            return cls.from_pretrained(str(self.weights), **options)
        except NameError as exc:  # diffusers left out a part whose optional package is missing
            raise UnsupportedPipelineError(
                _unbuildable(self.weights, self.pipeline_class, exc)
            ) from exc

    def _load_lora(self) -> None:
        from pathlib import Path

        if self.lora is None or not Path(self.lora).exists():
            raise FileNotFoundError(f"LoRA weights {self.lora} do not exist")
        if not hasattr(self.pipeline, "load_lora_weights"):
            raise ValueError(f"{type(self.pipeline).__name__} takes no LoRA weights")
        try:
            self.pipeline.load_lora_weights(self.lora, adapter_name="medibench")
        except (ValueError, KeyError, OSError, RuntimeError) as exc:
            raise ValueError(
                f"LoRA weights {self.lora} cannot be loaded into "
                f"{type(self.pipeline).__name__}: {exc}"
            ) from exc
        self.pipeline.set_adapters(["medibench"], adapter_weights=[self.lora_scale])

    def _generator_device(self) -> str:
        # With CPU offload the pipeline draws its noise where it runs: the accelerator.
        return self.device

    def runtime(self) -> dict[str, Any]:
        """What ``"auto"`` options resolved to on this machine (recorded in the run's
        ``model_runtime``): device, dtype, batch size, CPU offload."""
        return {
            "device": self.device,
            "dtype": str(self.dtype).removeprefix("torch."),
            "batch_size": self.batch_size,
            "cpu_offload": self.cpu_offload,
            **({"lora": self.lora, "lora_scale": self.lora_scale} if self.lora else {}),
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, weights={str(self.weights)!r})"


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
        if not device.startswith("cuda"):
            dtype = "float32"
        elif torch.cuda.is_bf16_supported():  # Ampere and later: bfloat16, whatever the model
            dtype = "bfloat16"
        else:
            dtype = cuda_dtype
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be auto or one of {sorted(set(_DTYPES))}, not {dtype!r}")
    return getattr(torch, _DTYPES[dtype])


def check_pipeline_class(weights: Any, pipeline_class: str, *, editing: bool = True) -> None:
    """Refuse a weights folder that holds another known family than ``pipeline_class``
    (:data:`KNOWN_PIPELINES`), naming what runs it; the generic ``DiffusionPipeline`` refuses
    only inpainting pipelines, and only for ``editing``. An unknown or absent ``_class_name``
    passes (custom pipelines).

    Raises:
        UnsupportedPipelineError: the message names the folder, both classes and the spec.
    """
    index = Path(str(weights)) / "model_index.json"
    if not index.is_file():
        return
    found = json.loads(index.read_text(encoding="utf-8")).get("_class_name")
    runs = KNOWN_PIPELINES.get(found or "")
    if runs is None or runs == KNOWN_PIPELINES.get(pipeline_class):
        return
    if pipeline_class == "DiffusionPipeline" and (runs != _BUILD or not editing):
        return
    generic = pipeline_class == "DiffusionPipeline"
    wanted = "an image-editing pipeline" if generic else pipeline_class
    raise UnsupportedPipelineError(
        f"{weights} holds a {found}, not {wanted}: run it with {runs.replace('PATH', str(weights))}"
    )


def _unbuildable(weights: Any, pipeline_class: str, exc: NameError) -> str:
    """Why diffusers could not build the pipeline of ``weights`` (a name its module defines only
    when an optional package is installed: OmniGenPipeline's processor needs torchvision)."""
    index = Path(str(weights)) / "model_index.json"
    if index.is_file():
        pipeline_class = json.loads(index.read_text(encoding="utf-8")).get("_class_name", "")
    missing = "" if has_torchvision() else (
        "; torchvision is not installed, and diffusers defines parts of some pipelines only "
        "with it (medibench's torch pin runs without torchvision)"
    )  # fmt: skip
    return (f"diffusers cannot build {pipeline_class} from {weights}: {exc}{missing}; this "
            "pipeline is not supported here")  # fmt: skip


def _to_uint8(x: np.ndarray) -> np.ndarray:
    # Diffusers' own numpy_to_pil rounding: [0, 1] floats -> round(x * 255).
    return np.clip(np.round(np.asarray(x, np.float32) * 255.0), 0, 255).astype(np.uint8)


def _raise_if_flagged(result: Any) -> None:
    flags = getattr(result, "nsfw_content_detected", None)
    if flags and any(flags):
        raise ContentRefusedError("the pipeline's safety checker flagged the output")
