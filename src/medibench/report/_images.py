"""The sample browser's pictures: thumbnails, ROI outlines, difference maps, full images.

For every sample, into the report folder: a JPEG thumbnail (longest side ``thumb_size``) of the
input, the input with the ROI outlined (yellow), the target, and per model the output and a
difference map (``|output - input|`` averaged over channels, 0 to 64 grey levels on the magma
scale, ROI outlined in cyan). The full images are copied into ``images/`` (a hard link when the
file system allows; a format a browser cannot show, DICOM say, is converted to PNG), or, with
``images="link"``, referenced by a path relative to the report folder. A file that is missing or
unreadable gives ``{"missing": "<file name>: <why>"}`` in place of its paths: the page shows a
placeholder that names it. Work is spread over a process pool.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any, Literal

import cv2
import numpy as np

from medibench.io import encode_image, read_image, read_mask, write_image

__all__ = ["ImageJob", "process_pool", "render_all", "render_sample_images"]

ImageMode = Literal["copy", "link"]
ImageJob = dict[str, Any]
"""One sample's work: ``sid``, ``input``, ``target``, ``mask`` (absolute paths or None) and
``outputs`` (``[(model_index, path or None, why_missing)]``)."""

_WEB = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"}
_DIFF_RANGE = 64.0  # grey levels of |output - input| that span the whole colour scale
_ROI = (255, 220, 0)
_ROI_ON_DIFF = (0, 255, 255)


def render_all(
    jobs: Sequence[ImageJob],
    out_dir: Path,
    *,
    thumb_size: int = 160,
    images: ImageMode = "copy",
    pool: Executor | None = None,
    workers: int = 1,
    lazy: bool = False,
) -> Iterable[dict[str, Any]]:
    """:func:`render_sample_images` for every job, in order; on ``pool`` (``workers``
    processes) when given. ``lazy``: return an iterator at once (the pool works meanwhile;
    without a pool, the work happens as it is consumed); otherwise a list."""
    (out_dir / "thumbs").mkdir(parents=True, exist_ok=True)
    if images == "copy":
        (out_dir / "images").mkdir(parents=True, exist_ok=True)
    args = [(job, out_dir, thumb_size, images) for job in jobs]
    if pool is None:
        results: Iterable[dict[str, Any]] = map(_star, args)
    else:
        results = pool.map(_star, args, chunksize=max(8, len(args) // (8 * max(1, workers))))
    return results if lazy else list(results)


def process_pool(workers: int | None = None) -> ProcessPoolExecutor:
    """A pool for the report's image and plot work (one OpenCV thread per process).

    Spawned, not forked: a fork taken while OpenCV's or another pool's threads hold a lock
    deadlocks the child (seen when the report ran right after the demo's generation pool).
    """
    return ProcessPoolExecutor(
        max_workers=workers or os.cpu_count() or 1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
    )


def render_sample_images(
    job: ImageJob, out_dir: Path, *, thumb_size: int = 160, images: ImageMode = "copy"
) -> dict[str, Any]:
    """One sample's pictures; returns ``{"input", "roi", "target", "outputs": {index: {"output",
    "diff"}}}``, each ``{"thumb": path, "full": path}`` (relative, ``/``-separated) or
    ``{"missing": text}``; ``None`` for what the sample does not have (no target, no mask)."""
    sid = job["sid"]
    res: dict[str, Any] = {"input": None, "roi": None, "target": None, "outputs": {}}
    inp, res["input"] = _picture(job["input"], f"{sid}__input", out_dir, thumb_size, images)
    small = _thumb(inp, thumb_size) if inp is not None else None
    outline = None
    if job.get("mask"):
        try:
            mask = read_mask(job["mask"])
            if small is not None:
                outline = _outline(mask, small.shape[:2])
        except Exception as exc:  # a bad mask is named on the page, the rest still shows
            res["roi"] = {"missing": _why(job["mask"], exc)}
    if outline is not None and small is not None:  # an outline is only drawn on a thumbnail
        roi = small.copy()
        roi[outline] = _ROI
        res["roi"] = {"thumb": _write_thumb(roi, out_dir, f"{sid}__roi"), "full": None}
    if job.get("target"):
        _, res["target"] = _picture(job["target"], f"{sid}__target", out_dir, thumb_size, images)
    for index, path, why in job["outputs"]:
        if path is None:  # no why: a text answer, shown as text
            res["outputs"][index] = {"output": {"missing": why} if why else None, "diff": None}
            continue
        out, pic = _picture(path, f"{sid}__m{index}", out_dir, thumb_size, images)
        diff = None
        if out is not None and small is not None:
            dmap = _diff_map(out, small)
            if outline is not None:
                dmap[outline] = _ROI_ON_DIFF
            diff = {"thumb": _write_thumb(dmap, out_dir, f"{sid}__m{index}_diff"), "full": None}
        res["outputs"][index] = {"output": pic, "diff": diff}
    return res


# -- helpers ----------------------------------------------------------------------------------
def _star(args) -> dict[str, Any]:
    job, out_dir, thumb_size, images = args
    return render_sample_images(job, out_dir, thumb_size=thumb_size, images=images)


def _init_worker() -> None:
    cv2.setNumThreads(1)


def _picture(path, name, out_dir: Path, thumb_size: int, images: ImageMode):
    src = Path(path)
    try:
        arr = read_image(src, mode="rgb")
    except Exception as exc:
        return None, {"missing": _why(src, exc)}
    full = _full(src, arr, name, out_dir, images)
    if max(arr.shape[:2]) <= thumb_size and src.suffix.lower() in _WEB:
        return arr, {"thumb": full, "full": full}  # small enough to be its own thumbnail
    return arr, {"thumb": _write_thumb(_thumb(arr, thumb_size), out_dir, name), "full": full}


def _full(src: Path, arr: np.ndarray, name: str, out_dir: Path, images: ImageMode) -> str:
    suffix = src.suffix.lower()
    if images == "link" and suffix in _WEB:
        return Path(os.path.relpath(src.resolve(), out_dir.resolve())).as_posix()
    (out_dir / "images").mkdir(exist_ok=True)
    if suffix not in _WEB:
        dest = write_image(out_dir / "images" / f"{name}.png", arr)
    else:
        dest = out_dir / "images" / f"{name}{suffix}"
        dest.unlink(missing_ok=True)
        try:
            os.link(src, dest)
        except OSError:
            shutil.copyfile(src, dest)
    return f"images/{dest.name}"


def _thumb_shape(shape: tuple[int, int], size: int) -> tuple[int, int]:
    h, w = shape
    scale = min(1.0, size / max(h, w))
    return max(1, round(h * scale)), max(1, round(w * scale))


def _thumb(arr: np.ndarray, size: int) -> np.ndarray:
    h, w = _thumb_shape(arr.shape[:2], size)
    if (h, w) == arr.shape[:2]:
        return arr.copy()
    return cv2.resize(arr, (w, h), interpolation=cv2.INTER_AREA)


def _write_thumb(rgb: np.ndarray, out_dir: Path, name: str) -> str:
    jpeg = encode_image(rgb, ".jpg", params=(cv2.IMWRITE_JPEG_QUALITY, 88), where=name)
    (out_dir / "thumbs" / f"{name}.jpg").write_bytes(jpeg)
    return f"thumbs/{name}.jpg"


def _outline(mask: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    m: np.ndarray = (mask > 0).astype(np.uint8)
    m = cv2.resize(m, shape[::-1], interpolation=cv2.INTER_NEAREST)
    return (m > 0) & ~(cv2.erode(m, np.ones((3, 3), np.uint8), borderValue=0) > 0)


def _diff_map(out: np.ndarray, small_input: np.ndarray) -> np.ndarray:
    # |output - input| at thumbnail size, channel mean, 0.._DIFF_RANGE grey levels -> magma.
    h, w = small_input.shape[:2]
    if out.shape[:2] != (h, w):
        out = cv2.resize(out, (w, h), interpolation=cv2.INTER_AREA)
    d = cv2.transform(cv2.absdiff(out, small_input), np.full((1, 3), 1 / 3))
    level = cv2.convertScaleAbs(d, alpha=255.0 / _DIFF_RANGE)
    return cv2.cvtColor(cv2.applyColorMap(level, cv2.COLORMAP_MAGMA), cv2.COLOR_BGR2RGB)


def _why(path, exc: Exception) -> str:
    name = Path(path).name
    if isinstance(exc, FileNotFoundError) or not Path(path).exists():
        return f"{name}: file not found"
    return f"{name}: {type(exc).__name__}: {exc}".replace(str(Path(path)), name)
