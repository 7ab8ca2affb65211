"""Source items as 2-D slices: image, label masks per structure, raw values, at a resolution bin.

Every file is read through :mod:`medibench.io`: NIfTI volumes (sliced along the source's
``axis`` with :func:`~medibench.io.read_nifti_slice`), DICOM files or series folders with a DICOM
SEG (frames matched to images by the SOP Instance UIDs the SEG references), and PNG/JPEG images
with a label image. Each slice is resized so its longer side is the nearest resolution bin (in
log scale) and its shorter side a multiple of 16; label masks are resized nearest-neighbour.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from medibench.build._errors import BuildError
from medibench.build._source import ItemSpec, SourceSpec
from medibench.io import ImageReadError, read_dicom, read_dicom_seg, read_image, read_mask

__all__ = ["Slice", "bin_size", "item_slices"]

_SEG_CLASS = "1.2.840.10008.5.1.4.1.1.66.4"


@dataclass
class Slice:
    """One 2-D slice of an item, at its resolution bin.

    ``image`` is uint8 RGB ``(H, W, 3)`` (grayscale repeated when ``grayscale``); ``raw`` the
    modality values (CT: HU) as float32 ``(H, W)`` when the file has them; ``structures`` maps
    each structure present to its bool ``(H, W)`` mask.
    """

    key: str
    item: ItemSpec
    index: int | None
    image: np.ndarray
    grayscale: bool
    structures: dict[str, np.ndarray]
    original_shape: tuple[int, int]
    bin: int
    raw: np.ndarray | None = None


def item_slices(source: SourceSpec, item: ItemSpec) -> Iterator[Slice]:
    """The slices of ``item`` that hold at least one labelled structure.

    Raises:
        BuildError: a label map whose shape differs from its image, a label volume with no
            foreground, labels named in the source but absent from the item (unless
            ``missing_labels: skip``), an unreadable or corrupt file (naming it and the item).
    """
    try:
        name = item.image.name.lower()
        if name.endswith((".nii", ".nii.gz")):
            planes = _volume_planes(source, item)
        elif item.image.is_dir() or name.endswith(".dcm"):
            planes = _dicom_planes(source, item)
        else:
            planes = _image_planes(source, item)
        for index, image, raw, structures in planes:
            if not any(m.any() for m in structures.values()):
                continue
            yield _binned(source, item, index, image, raw, structures)
    except ImageReadError as exc:
        raise BuildError(f"item '{item.id}': {exc}") from exc


def bin_size(shape: tuple[int, int], bins: tuple[int, ...]) -> tuple[int, int, int]:
    """``(bin, height, width)``: the bin nearest the longer side in log2, the longer side
    scaled to it, the shorter one to the nearest multiple of 16 (at least 16)."""
    h, w = shape
    longer = max(h, w)
    chosen = min(bins, key=lambda b: (abs(math.log2(b) - math.log2(longer)), b))
    scale = chosen / longer
    short = max(16, int(round(min(h, w) * scale / 16)) * 16)
    return (chosen, chosen, short) if h >= w else (chosen, short, chosen)


# --- readers ---------------------------------------------------------------------------------

Plane = tuple[int | None, np.ndarray, np.ndarray | None, dict[str, np.ndarray]]


def _volume_planes(source: SourceSpec, item: ItemSpec) -> Iterator[Plane]:
    from medibench.io import read_nifti_slice, to_uint8

    image = _load_volume(item.image, item)
    values = np.asanyarray(image.dataobj)
    lo, hi = source.intensity or _finite_range(values, item)
    if not lo < hi:
        raise BuildError(
            f"item '{item.id}': 'intensity: [{lo:g}, {hi:g}]' is an empty range for "
            f"{item.image} (the first value must be below the second)"
        )
    maps = _label_volumes(source, item, values.shape)
    axis = source.axis
    for index in range(values.shape[axis]):
        structures = {
            name: read_nifti_slice(vol, axis=axis, index=index) > cut
            for name, (vol, cut) in maps.items()
        }
        if not any(m.any() for m in structures.values()):
            continue
        plane = read_nifti_slice(image, axis=axis, index=index)
        yield index, to_uint8(plane, data_range=(lo, hi)), None, structures


def _load_volume(path: Path, item: ItemSpec) -> Any:
    """A canonical (RAS+) in-memory volume, so slicing it is cheap."""
    import nibabel as nib

    from medibench.io._errors import require_file

    require_file(path)
    try:
        image = nib.as_closest_canonical(nib.load(str(path)))
        data = np.asanyarray(image.dataobj)
    except Exception as exc:  # nibabel raises many types on damaged files
        raise BuildError(
            f"item '{item.id}': {path}: not a volume nibabel can read ({type(exc).__name__}: {exc})"
        ) from exc
    if data.ndim == 4 and data.shape[3] == 1:
        data = data[..., 0]
    if data.ndim != 3:
        raise BuildError(f"item '{item.id}': {path}: expected a 3-D volume, got {data.shape}")
    return nib.Nifti1Image(data, image.affine)


def _label_volumes(
    source: SourceSpec, item: ItemSpec, shape: tuple[int, ...]
) -> dict[str, tuple[Any, float]]:
    """Per structure: a volume and the cut above which a voxel is inside."""
    import nibabel as nib

    out: dict[str, tuple[Any, float]] = {}
    if item.label is not None:
        vol = _load_volume(item.label, item)
        data = np.rint(np.asanyarray(vol.dataobj)).astype(np.int32)
        _check_label(source, item, item.label, data, shape)
        for value, name in source.labels.items():
            one = nib.Nifti1Image((data == value).astype(np.uint8), vol.affine)
            out[name] = (one, 0.5)
    for name, path in item.labels.items():
        vol = _load_volume(path, item)
        data = np.asanyarray(vol.dataobj)
        _check_shape(item, path, data.shape, shape)
        if not (data > source.label_threshold).any():
            raise BuildError(
                f"item '{item.id}': label volume {path} ({name}) has no foreground "
                f"(no voxel above {source.label_threshold:g})"
            )
        out[name] = (vol, source.label_threshold)
    return out


def _check_label(
    source: SourceSpec, item: ItemSpec, path: Path, data: np.ndarray, shape: tuple[int, ...]
) -> None:
    _check_shape(item, path, data.shape, shape)
    if not data.any():
        raise BuildError(f"item '{item.id}': label map {path} has no foreground (every value is 0)")
    present = set(np.unique(data).tolist())
    absent = {v: n for v, n in source.labels.items() if v not in present}
    if absent and source.missing_labels == "error":
        found = sorted(v for v in present if v)
        raise BuildError(
            f"item '{item.id}': labels named in the source are absent from {path}: "
            + ", ".join(f"{v} ({n})" for v, n in absent.items())
            + f"; the map holds values {found} (set missing_labels: skip to allow this)"
        )


def _check_shape(item: ItemSpec, path: Path, got: tuple[int, ...], want: tuple[int, ...]) -> None:
    if tuple(got[: len(want)]) != tuple(want) or len(got) not in (len(want), len(want) + 1):
        raise BuildError(
            f"item '{item.id}': label map {path} has shape {tuple(got)} but its image "
            f"{item.image} has shape {tuple(want)}"
        )


def _finite_range(values: np.ndarray, item: ItemSpec) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0 or finite.min() == finite.max():
        raise BuildError(f"item '{item.id}': {item.image} is constant; set 'intensity: [lo, hi]'")
    return float(finite.min()), float(finite.max())


def _image_planes(source: SourceSpec, item: ItemSpec) -> Iterator[Plane]:
    image = read_image(item.image, mode="rgb")
    yield None, image, None, _planar_labels(source, item, image.shape[:2], item.image)


def _planar_labels(
    source: SourceSpec, item: ItemSpec, shape: tuple[int, ...], image_path: Path
) -> dict[str, np.ndarray]:
    """Structure masks of a 2-D item from its label image or binary label images."""
    out: dict[str, np.ndarray] = {}
    if item.label is not None:
        data = read_image(item.label, mode="unchanged")
        if data.ndim == 3:
            if not all(np.array_equal(data[..., 0], data[..., c]) for c in range(1, 3)):
                raise BuildError(
                    f"item '{item.id}': label map {item.label} is a colour image; save label "
                    "values in one channel"
                )
            data = data[..., 0]
        _check_label(source, item, item.label, data, tuple(shape))
        for value, name in source.labels.items():
            out[name] = data == value
    for name, path in item.labels.items():
        mask = read_mask(path)
        _check_shape(item, path, mask.shape, tuple(shape))
        if not mask.any():
            raise BuildError(f"item '{item.id}': label image {path} ({name}) has no foreground")
        out[name] = mask
    return out


def _dicom_planes(source: SourceSpec, item: ItemSpec) -> Iterator[Plane]:
    files = _series(item)
    window: Any = source.window if source.window is not None else "auto"
    ct = source.modality.strip().lower().startswith("ct")
    seg = item.label is not None and _is_seg(item.label)
    masks = _seg_masks(source, item, files) if seg else {}
    for index, (path, uid) in enumerate(files):
        image = read_dicom(path, window=window)
        if seg:
            structures = masks.get(uid, {})
            for mask in structures.values():
                _check_shape(item, item.label or path, mask.shape, image.shape[:2])
        else:
            structures = _planar_labels(source, item, image.shape[:2], path)
        raw = read_dicom(path, output="float", window=None) if ct and image.ndim == 2 else None
        yield index, image, raw, structures


def _series(item: ItemSpec) -> list[tuple[Path, str]]:
    """The image files of a DICOM item (one file, or a folder sorted by InstanceNumber) and
    their SOP Instance UIDs."""
    import pydicom

    from medibench.io._errors import require_file

    paths = (
        sorted(p for p in item.image.iterdir() if p.is_file())
        if item.image.is_dir()
        else [item.image]
    )
    if not paths:
        raise BuildError(f"item '{item.id}': DICOM folder {item.image} holds no file")
    entries = []
    for path in paths:
        require_file(path)
        try:
            ds = pydicom.dcmread(path, stop_before_pixels=True)
        except Exception as exc:  # pydicom raises many types on damaged files
            raise BuildError(
                f"item '{item.id}': {path}: not a readable DICOM file ({type(exc).__name__}: {exc})"
            ) from exc
        uid = ds.get("SOPInstanceUID")
        if not uid or "Rows" not in ds or "Columns" not in ds:
            raise BuildError(
                f"item '{item.id}': {path}: not a complete DICOM image (no "
                f"{'SOPInstanceUID' if not uid else 'Rows/Columns'}: the file is cut off or "
                "damaged)"
            )
        entries.append((int(ds.get("InstanceNumber", 0) or 0), path, str(uid)))
    entries.sort(key=lambda e: (e[0], str(e[1])))
    return [(p, uid) for _, p, uid in entries]


def _is_seg(path: Path) -> bool:
    import pydicom

    with open(path, "rb") as fh:
        head = fh.read(132)
    if not (path.name.lower().endswith(".dcm") or head[128:132] == b"DICM"):
        return False  # a label image (PNG), not DICOM
    try:
        ds = pydicom.dcmread(path, stop_before_pixels=True)
    except Exception as exc:  # pydicom raises many types on damaged files
        raise ImageReadError(path, f"damaged DICOM file ({type(exc).__name__}: {exc})") from exc
    return str(ds.get("SOPClassUID", "")) == _SEG_CLASS


def _seg_masks(
    source: SourceSpec, item: ItemSpec, files: list[tuple[Path, str]]
) -> dict[str, dict[str, np.ndarray]]:
    """``{image SOP UID: {structure: mask}}`` from the item's DICOM SEG."""
    import pydicom

    assert item.label is not None
    segments = read_dicom_seg(item.label)
    ds = pydicom.dcmread(item.label, stop_before_pixels=True)
    refs = _frame_references(ds)
    known = {uid for _, uid in files}
    names = {n: source.labels.get(n) for n in segments}
    unnamed = [n for n, name in names.items() if name is None]
    if unnamed and source.missing_labels == "error":
        raise BuildError(
            f"item '{item.id}': SEG {item.label} has segment(s) {unnamed} that the source's "
            f"labels do not name (labels: {source.labels})"
        )
    absent = {v: n for v, n in source.labels.items() if v not in segments}
    if absent and source.missing_labels == "error":
        raise BuildError(
            f"item '{item.id}': labels named in the source are absent from SEG {item.label}: "
            + ", ".join(f"{v} ({n})" for v, n in absent.items())
            + f"; it has segments {sorted(segments)}"
        )
    out: dict[str, dict[str, np.ndarray]] = {}
    counters = dict.fromkeys(segments, 0)
    for frame, (number, uid) in enumerate(refs):
        if uid not in known:
            raise BuildError(
                f"item '{item.id}': SEG {item.label} frame {frame} refers to image {uid}, which "
                f"is not among the item's images ({item.image})"
            )
        name = names.get(number)
        mask = segments[number][counters[number]]
        counters[number] += 1
        if name is not None:
            slot = out.setdefault(uid, {})
            slot[name] = slot[name] | mask if name in slot else mask
    if not any(m.any() for per in out.values() for m in per.values()):
        raise BuildError(f"item '{item.id}': SEG {item.label} has no foreground")
    return out


def _frame_references(ds: Any) -> list[tuple[int, str]]:
    """``(segment number, referenced image UID)`` of each SEG frame, in stored order."""
    refs = []
    for i, group in enumerate(ds.get("PerFrameFunctionalGroupsSequence", [])):
        try:
            number = int(group.SegmentIdentificationSequence[0].ReferencedSegmentNumber)
            source = group.DerivationImageSequence[0].SourceImageSequence[0]
            refs.append((number, str(source.ReferencedSOPInstanceUID)))
        except (AttributeError, IndexError) as exc:
            raise BuildError(
                f"SEG frame {i} names no segment or no source image ({exc}); medibench matches "
                "SEG frames to images by their Derivation Image Sequence"
            ) from None
    return refs


def _binned(
    source: SourceSpec,
    item: ItemSpec,
    index: int | None,
    image: np.ndarray,
    raw: np.ndarray | None,
    structures: dict[str, np.ndarray],
) -> Slice:
    h, w = image.shape[:2]
    chosen, nh, nw = bin_size((h, w), source.bins)
    shrink = nh * nw < h * w
    interp = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
    if (nh, nw) != (h, w):
        image = cv2.resize(np.ascontiguousarray(image), (nw, nh), interpolation=interp)
        if raw is not None:
            raw = cv2.resize(raw.astype(np.float32), (nw, nh), interpolation=interp)
        structures = {
            name: cv2.resize(m.astype(np.uint8), (nw, nh), interpolation=cv2.INTER_NEAREST) > 0
            for name, m in structures.items()
        }
    grayscale = image.ndim == 2 or (
        np.array_equal(image[..., 0], image[..., 1])
        and np.array_equal(image[..., 0], image[..., 2])
    )
    rgb = (
        np.repeat(image[:, :, None], 3, axis=2) if image.ndim == 2 else np.ascontiguousarray(image)
    )
    key = item.id if index is None else f"{item.id}-s{index:03d}"
    return Slice(
        key=key,
        item=item,
        index=index,
        image=rgb,
        grayscale=bool(grayscale),
        structures={n: m for n, m in structures.items() if m.any()},
        original_shape=(h, w),
        bin=chosen,
        raw=None if raw is None else raw.astype(np.float32),
    )
