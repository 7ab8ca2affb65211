"""Feature extractors for FID, KID, embedding similarity and LPIPS, as declared plug-ins.

``load_extractor("NAME:PATH")`` (what ``--features NAME:PATH`` takes):

=====================  =========================================================================
``inception:PATH``     pytorch-fid's Inception-v3, from ``pt_inception-2015-12-05-6726825d.pth``
                       (the file or its folder); 2,048 pool features. Images resized to 299x299 by
                       ``torch-bilinear`` (pytorch-fid), ``pil-bicubic`` (clean-fid's choice) or
                       ``pil-lanczos``.
``hf:PATH``            any transformers vision model saved with ``save_pretrained`` (DINOv2,
                       Rad-DINO, ...), with its image processor; the pooled output (or CLS token).
``dinov2:PATH``,       the same, named.
``rad-dino:PATH``
``clip:PATH``          a transformers CLIP model's image embeddings, and its text embeddings in
                       the same space (:meth:`Extractor.texts`: the projected text features of
                       its tokenizer's tokens, truncated at the tokenizer's
                       ``model_max_length``). (``open_clip`` checkpoints need torchvision, which
                       breaks diffusers here: convert them to the transformers format.)
``lpips-alex:DIR``,    LPIPS v0.1: a folder with torchvision's backbone weights
``lpips-vgg:DIR``      (``alexnet-owt-7be5be79.pth`` / ``vgg16-397923af.pth``) and LPIPS's linear
                       layers (``alex.pth`` / ``vgg.pth``); a distance per image pair.
``module:callable``    any importable callable returning an extractor (or a function from a list
                       of uint8 RGB images to an (N, D) array).
=====================  =========================================================================

Every extractor carries :attr:`Extractor.info`: its name, weights path and sha256, the resize
filter and size, and the feature dimension; results record it. Nothing downloads: missing
weights raise :class:`ExtractorWeightsError` naming the file to supply.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = [
    "Extractor",
    "ExtractorWeightsError",
    "InceptionExtractor",
    "LPIPS",
    "TransformersExtractor",
    "load_extractor",
]

INCEPTION_FILE = "pt_inception-2015-12-05-6726825d.pth"
INCEPTION_URL = (
    "https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/" + INCEPTION_FILE
)
LPIPS_FILES = {
    "alex": ("alexnet-owt-7be5be79.pth", "alex.pth"),
    "vgg": ("vgg16-397923af.pth", "vgg.pth"),
}
Resize = Literal["torch-bilinear", "pil-bicubic", "pil-lanczos"]
_PIL = {"pil-bicubic": "BICUBIC", "pil-lanczos": "LANCZOS"}


class ExtractorWeightsError(FileNotFoundError, ValueError):
    """Weights missing, or not the shapes the network needs (the message names the file)."""


class Extractor:
    """Maps a list of ``(H, W, 3)`` uint8 RGB images to ``(N, D)`` float64 features; a
    CLIP-family extractor also maps texts into the same space (:meth:`texts`)."""

    info: dict[str, Any]

    def texts(self, texts: Sequence[str], *, batch_size: int = 16) -> np.ndarray:
        """``(N, D)`` float64 text embeddings in the space of the image features.

        Raises:
            ValueError: the extractor has no text tower (only CLIP-family models have one).
        """
        raise ValueError(
            f"feature extractor {self.info.get('name')!r} has no text tower: texts need a "
            "CLIP-family model (clip:PATH) that embeds images and texts in one space"
        )

    def __call__(self, images: Sequence[np.ndarray], *, batch_size: int = 16) -> np.ndarray:
        chunks = [
            self._batch(images[i : i + batch_size]) for i in range(0, len(images), batch_size)
        ]
        if not chunks:
            return np.zeros((0, int(self.info.get("dim") or 0)))
        return np.concatenate(chunks).astype(np.float64)

    def _batch(self, images: Sequence[np.ndarray]) -> np.ndarray:
        raise NotImplementedError


def load_extractor(spec: str, **options: Any) -> Any:
    """An extractor (or :class:`LPIPS`) from ``NAME:PATH`` or ``module:callable``."""
    name, _, arg = spec.partition(":")
    if not arg:
        raise ValueError(f"feature extractor {spec!r}: expected NAME:PATH or module:callable")
    if name == "inception":
        return InceptionExtractor(arg, **options)
    if name in ("hf", "dinov2", "rad-dino", "clip"):
        return TransformersExtractor(arg, name=name, **options)
    if name in ("lpips-alex", "lpips-vgg"):
        return LPIPS(arg, net=name.removeprefix("lpips-"), **options)  # type: ignore[arg-type]
    if name == "open_clip":
        raise ImportError(
            "open_clip needs torchvision, which cannot be installed beside diffusers here; save "
            "the CLIP model in the transformers format and use clip:PATH"
        )
    try:
        factory = getattr(importlib.import_module(name), arg)
    except (ImportError, AttributeError) as exc:
        known = "inception, hf, dinov2, rad-dino, clip, lpips-alex, lpips-vgg"
        raise ValueError(
            f"feature extractor {spec!r}: not one of {known}, and {name}:{arg} is not an "
            f"importable callable ({exc})"
        ) from exc
    return _CallableExtractor(factory(**options) if options else factory, spec)


class InceptionExtractor(Extractor):
    """pytorch-fid's Inception-v3 pool features (2,048); weights from ``path``."""

    def __init__(
        self, path: str | Path, *, resize: Resize = "torch-bilinear", size: int = 299, device="cpu"
    ) -> None:
        import torch

        from medibench.analysis._nets import FIDInceptionV3

        _check_resize(resize)
        file = Path(path)
        file = file / INCEPTION_FILE if file.is_dir() else file
        if not file.is_file():
            raise ExtractorWeightsError(
                f"Inception-v3 FID weights not found: {file}; supply pytorch-fid's "
                f"{INCEPTION_FILE} ({INCEPTION_URL}): medibench downloads nothing"
            )
        self.net = FIDInceptionV3()
        load_checked(self.net, file, "pytorch-fid Inception-v3")
        self.net.eval().to(device)
        self.device, self.resize, self.size, self._torch = device, resize, int(size), torch
        self.info = _info("inception-v3-fid", file, resize, (self.size, self.size), 2048)

    def _batch(self, images: Sequence[np.ndarray]) -> np.ndarray:
        torch = self._torch
        x = _to_tensor(images, self.resize, (self.size, self.size)).to(self.device)
        with torch.inference_mode():
            return self.net(2 * x - 1).cpu().numpy()


class TransformersExtractor(Extractor):
    """A transformers vision model from a local folder: ``pool`` = ``pooler`` (the model's
    pooled output, else the CLS token), ``cls`` or ``mean`` (of the patch tokens); CLIP models
    give their projected image embeddings."""

    def __init__(
        self,
        path: str | Path,
        *,
        name: str = "hf",
        pool: Literal["pooler", "cls", "mean"] = "pooler",
        device: str = "cpu",
    ) -> None:
        from medibench.models._weights import (
            WeightsNotFoundError,
            import_transformers,
            transformers_folder,
        )

        _, transformers = import_transformers(f"the {name} extractor")
        try:
            folder = transformers_folder(path, f"{name} vision model")
        except WeightsNotFoundError as exc:
            raise ExtractorWeightsError(f"{exc}; medibench downloads nothing") from None
        weights = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
        if not weights:
            raise ExtractorWeightsError(f"{name}: {folder} has no model.safetensors weights")
        self.processor = transformers.AutoImageProcessor.from_pretrained(
            folder, local_files_only=True
        )
        self.model = transformers.AutoModel.from_pretrained(folder, local_files_only=True)
        self.model.eval().to(device)
        self.clip = hasattr(self.model, "get_image_features")
        self.pool, self.device, self.folder, self._tokenizer = pool, device, folder, None
        size = getattr(self.processor, "crop_size", None) or getattr(self.processor, "size", None)
        resample = getattr(self.processor, "resample", None)
        self.info = _info(
            name,
            weights,
            f"{type(self.processor).__name__} resample={getattr(resample, 'name', resample)}",
            dict(size) if size else None,
            None,
        )
        self.info["pool"] = "image_embeds" if self.clip else pool
        self.info["model"] = type(self.model).__name__

    def _batch(self, images: Sequence[np.ndarray]) -> np.ndarray:
        import torch

        inputs = self.processor(images=list(images), return_tensors="pt").to(self.device)
        with torch.inference_mode():
            if self.clip:
                out = self.model.get_image_features(pixel_values=inputs["pixel_values"])
                feats = out if isinstance(out, torch.Tensor) else out.pooler_output
            else:
                out = self.model(**inputs)
                hidden = out.last_hidden_state
                if self.pool == "mean":
                    feats = hidden[:, 1:].mean(1)
                elif self.pool == "pooler" and getattr(out, "pooler_output", None) is not None:
                    feats = out.pooler_output
                else:
                    feats = hidden[:, 0]
        result = feats.float().cpu().numpy()
        self.info["dim"] = int(result.shape[1])
        return result

    def texts(self, texts: Sequence[str], *, batch_size: int = 16) -> np.ndarray:
        """The projected text features (``get_text_features``) of a CLIP-family model, from the
        tokenizer saved beside it; texts longer than its ``model_max_length`` are truncated."""
        import torch

        if not hasattr(self.model, "get_text_features"):
            raise ValueError(
                f"{self.info['name']}: {type(self.model).__name__} at {self.folder} has no text "
                "tower: texts need a CLIP-family model (clip:PATH) that embeds images and "
                "texts in one space"
            )
        tokenizer = self._text_tokenizer()
        chunks = []
        for i in range(0, len(texts), batch_size):
            enc = tokenizer(
                list(texts[i : i + batch_size]), padding=True, truncation=True, return_tensors="pt"
            ).to(self.device)
            with torch.inference_mode():
                out = self.model.get_text_features(**enc)
            feats = out if isinstance(out, torch.Tensor) else out.pooler_output
            chunks.append(feats.float().cpu().numpy())
        if not chunks:
            return np.zeros((0, int(self.info.get("dim") or 0)))
        return np.concatenate(chunks).astype(np.float64)

    def _text_tokenizer(self) -> Any:
        if self._tokenizer is None:
            from medibench.models._weights import import_transformers

            _, transformers = import_transformers(f"the {self.info['name']} text tower")
            try:
                tokenizer = transformers.AutoTokenizer.from_pretrained(
                    self.folder, local_files_only=True
                )
            except (OSError, ValueError) as exc:
                raise ExtractorWeightsError(
                    f"{self.info['name']}: no tokenizer in {self.folder} ({exc}); save the "
                    "model's tokenizer beside it (tokenizer.save_pretrained)"
                ) from None
            self.info["text_max_length"] = int(tokenizer.model_max_length)
            self._tokenizer = tokenizer
        return self._tokenizer


class LPIPS:
    """LPIPS v0.1 distance between image pairs (lower: more alike); ``size`` resizes both
    images of a pair first (MedGEN-Bench: 256x256), ``None`` needs equal sizes."""

    def __init__(
        self,
        folder: str | Path,
        *,
        net: Literal["alex", "vgg"] = "alex",
        size: int | None = None,
        resize: Resize = "torch-bilinear",
        device: str = "cpu",
    ) -> None:
        from medibench.analysis._nets import LPIPSNet

        _check_resize(resize)
        if net not in LPIPS_FILES:
            raise ValueError(f"LPIPS net must be alex or vgg, not {net!r}")
        root = Path(folder)
        files = [root / f for f in LPIPS_FILES[net]]
        for f, what in zip(
            files, ("torchvision backbone", "LPIPS v0.1 linear layers"), strict=True
        ):
            if not f.is_file():
                raise ExtractorWeightsError(
                    f"LPIPS ({net}): {what} not found: {f}; supply {f.name} in {root} "
                    "(medibench downloads nothing)"
                )
        self.net = LPIPSNet(net)
        backbone = _read_state(files[0])
        backbone = {k: v for k, v in backbone.items() if k.startswith("features.")}
        lin = {k: v for k, v in _read_state(files[1]).items() if k.startswith("lin")}
        load_checked(self.net, files, f"LPIPS {net}", state={**backbone, **lin})
        self.net.eval().to(device)
        self.size, self.resize, self.device = size, resize, device
        shape = None if size is None else (size, size)
        self.info = _info(f"lpips-{net}-v0.1", files, resize if size else "none", shape, 1)

    def __call__(
        self, a: Sequence[np.ndarray], b: Sequence[np.ndarray], *, batch_size: int = 16
    ) -> np.ndarray:
        import torch

        if len(a) != len(b):
            raise ValueError(f"LPIPS compares pairs: {len(a)} and {len(b)} images")
        out = []
        for i in range(0, len(a), batch_size):
            xa, xb = list(a[i : i + batch_size]), list(b[i : i + batch_size])
            shape = None if self.size is None else (self.size, self.size)
            if shape is None and any(x.shape != y.shape for x, y in zip(xa, xb, strict=True)):
                raise ValueError("LPIPS without size= needs pairs of one size")
            ta = _to_tensor(xa, self.resize, shape).to(self.device)
            tb = _to_tensor(xb, self.resize, shape).to(self.device)
            with torch.inference_mode():
                out.append(self.net(2 * ta - 1, 2 * tb - 1).cpu().numpy())
        return np.concatenate(out).astype(np.float64) if out else np.zeros(0)


class _CallableExtractor(Extractor):
    def __init__(self, fn: Any, spec: str) -> None:
        self.fn = fn
        own = getattr(fn, "info", None)
        self.info = dict(own) if isinstance(own, dict) else _info(spec, None, None, None, None)
        self.info.setdefault("name", spec)

    def _batch(self, images: Sequence[np.ndarray]) -> np.ndarray:
        feats = np.asarray(self.fn(list(images)), dtype=np.float64)
        if feats.ndim != 2 or feats.shape[0] != len(images):
            raise ValueError(
                f"extractor {self.info['name']} returned shape {feats.shape} for {len(images)} "
                "images; expected (N, D)"
            )
        return feats


# -- helpers ---------------------------------------------------------------------------------
def load_checked(
    net: Any, files: Path | Sequence[Path], what: str, state: dict[str, Any] | None = None
) -> None:
    """Load weights into ``net`` strictly: every tensor present, each of the shape the network
    needs (``num_batches_tracked`` counters may be absent); a mismatch names the file and key."""
    paths = [files] if isinstance(files, Path) else list(files)
    where = ", ".join(str(p) for p in paths)
    state = state if state is not None else _read_state(paths[0])
    need = net.state_dict()
    missing = [k for k in need if k not in state and not k.endswith("num_batches_tracked")]
    missing = [k for k in missing if k not in ("shift", "scale")]
    unexpected = [k for k in state if k not in need]
    bad = [
        f"{k} has shape {tuple(state[k].shape)}, the network needs {tuple(need[k].shape)}"
        for k in need
        if k in state and tuple(state[k].shape) != tuple(need[k].shape)
    ]
    if missing or unexpected or bad:
        parts = bad[:3]
        if missing:
            parts.append(f"{len(missing)} tensor(s) missing (first {missing[0]})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected tensor(s) (first {unexpected[0]})")
        raise ExtractorWeightsError(f"weights {where} do not fit the {what}: {'; '.join(parts)}")
    net.load_state_dict({**need, **state})


def _read_state(path: Path) -> dict[str, Any]:
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a corrupt or non-torch file: say which
        raise ExtractorWeightsError(f"cannot read weights {path}: {exc}") from exc
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ExtractorWeightsError(
            f"weights {path} hold a {type(state).__name__}, not a state dict"
        )
    return state


def _to_tensor(images: Sequence[np.ndarray], resize: str, size: tuple[int, int] | None) -> Any:
    """(N, 3, H, W) float32 in [0, 1], resized by the declared filter."""
    import torch
    import torch.nn.functional as F
    from PIL import Image

    from medibench.models._base import as_rgb_uint8

    arrays = [as_rgb_uint8(im) for im in images]
    if size is not None and resize in _PIL:
        how = getattr(Image.Resampling, _PIL[resize])
        arrays = [np.asarray(Image.fromarray(a).resize((size[1], size[0]), how)) for a in arrays]
    tensors = [torch.from_numpy(np.array(a)).permute(2, 0, 1) for a in arrays]
    if size is not None and resize == "torch-bilinear":
        tensors = [
            F.interpolate(t[None].float() / 255.0, size=size, mode="bilinear", align_corners=False)[
                0
            ]
            for t in tensors
        ]
        return torch.stack(tensors)
    return torch.stack(tensors).float() / 255.0


def _check_resize(resize: str) -> None:
    if resize not in ("torch-bilinear", *_PIL):
        raise ValueError(
            f"resize must be torch-bilinear, pil-bicubic or pil-lanczos, not {resize!r}"
        )


def _info(
    name: str, weights: Path | Sequence[Path] | None, resize: str | None, size: Any, dim: int | None
) -> dict[str, Any]:
    from medibench.io import sha256_file

    paths = [] if weights is None else [weights] if isinstance(weights, Path) else list(weights)
    return {
        "name": name,
        "weights": [str(p) for p in paths],
        "weights_sha256": [sha256_file(p) for p in paths],
        "resize": resize,
        "size": list(size) if isinstance(size, tuple) else size,
        "dim": dim,
    }
