"""The starter benchmark: content, exact targets, byte reproducibility, registry access."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from medibench.datasets import MANIFEST, DatasetError, load_dataset, load_images, read_native
from medibench.io import read_dicom, read_image, read_nifti_slice, sha256_file, to_uint8
from medibench.metrics import blend_overlay
from medibench.samples import OVERLAY_COLORS, Perspective
from medibench.synth import (
    STARTER_VERSION,
    add_gaussian_noise,
    build_starter,
    gaussian_blur,
    item_rng,
    load_starter,
    reduce_contrast,
    starter_cache_dir,
)

# sha256 of samples.jsonl for seed 0, size 256. It depends only on medibench's code and the
# pixel data of the shipped sources (lesion positions are drawn inside regions found in them).
SAMPLES_JSONL_SHA256 = "9f65c8069d40b84c71ceb0ac353c52247cbfa799d01aecbe1613fd45533a3426"

# sha256 of decoded pixels (not of PNG files: the PNG bytes depend on the zlib/libpng inside the
# OpenCV wheel, the pixels do not). A change in nilearn's template, pydicom's decoding or OpenCV's
# resize would change them too: that is the point of pinning.
PIXEL_SHA256 = {
    "perception-003_target": "31e57e25d316b206338223fb963a994d4f0b7210d9bc0114a8f7bfbff3c55815",
    "modification-002_input": "6747bef4ac0129eb8750b2d6e3f9c3342718dd18df5b5d5cfbe58584de0df6b0",
    "modification-007_input": "3f30d7d664b574f933032ce27a57b91368e86dd6ce49d689c3e94e55f5017643",
    "transformation-000_input": "6f30e12e2554679cc0db0d8c57ee38e4e00a8e135d3dc7b7732e9015447c1ce2",
    "transformation-005_input": "0fdd64a250088e19479e892116f8c26339a8dba6af22b4d4ea8e943f11e576e7",
}

# Display windows (centre, width) of the DICOM sources, restated here so the test rebuilds the
# originals without medibench.synth.
WINDOWS = {
    "693_UNCR.dcm": (40.0, 100.0),
    "RG1_UNCR.dcm": (15000.0, 30000.0),
    "RG3_UNCR.dcm": (550.0, 1024.0),
    "MR2_UNCR.dcm": (1000.0, 2000.0),
    "CT_small.dcm": (40.0, 400.0),
}
SIZE = 256


def _square(image: np.ndarray, *, nearest: bool = False) -> np.ndarray:
    h, w = image.shape[:2]
    n = max(h, w)
    pad = [((n - h) // 2, n - h - (n - h) // 2), ((n - w) // 2, n - w - (n - w) // 2)]
    padded = np.pad(image, pad + [(0, 0)] * (image.ndim - 2))
    interp = cv2.INTER_NEAREST if nearest else (cv2.INTER_AREA if n > SIZE else cv2.INTER_LINEAR)
    return cv2.resize(padded, (SIZE, SIZE), interpolation=interp)


def _original(sample) -> np.ndarray:
    """The unedited source image of a sample, rebuilt from the shipped data, as RGB."""
    if sample.source["file"] in WINDOWS:
        from pydicom.data import get_testdata_file

        path = get_testdata_file(sample.source["file"])
        gray = _square(read_dicom(path, window=WINDOWS[sample.source["file"]]))
    elif "retina" in sample.source["dataset"]:
        from skimage.data import retina

        return _square(retina())
    else:
        from nilearn.datasets import load_mni152_template

        plane = read_nifti_slice(
            load_mni152_template(resolution=2), axis=2, index=sample.metadata["slice_index"]
        )
        gray = _square(to_uint8(plane, data_range=(0.0, 1.0)))
    return np.repeat(gray[:, :, None], 3, axis=2)


def _pixels_sha256(path: Path) -> str:
    return hashlib.sha256(read_image(path, mode="rgb").tobytes()).hexdigest()


def _by_perspective(root: Path, perspective: str):
    return [s for s in read_native(root) if s.perspective == Perspective(perspective)]


def test_counts_ids_and_fields(starter_root: Path) -> None:
    ds = read_native(starter_root)
    assert len(ds) == 24
    for perspective in ("perception", "modification", "transformation"):
        ids = [s.sample_id for s in _by_perspective(starter_root, perspective)]
        assert ids == [f"{perspective}-{i:03d}" for i in range(8)]
    for s in ds:
        assert s.benchmark == "starter" and s.task and s.region and s.modality and s.description
        assert s.source["licence"] and s.source["dataset"]
        assert s.metadata["seed"] == 0 and s.metadata["seed_key"].startswith(f"starter|{s.task}|")
        images = load_images(s)
        assert images.input.shape == images.target.shape == (SIZE, SIZE, 3)
        if s.perspective == Perspective.transformation:
            assert s.mask is None
        else:
            assert images.mask.shape == (SIZE, SIZE) and images.mask.any() and not images.mask.all()
            mask_png = read_image(s.mask, mode="unchanged")
            assert set(np.unique(mask_png).tolist()) == {0, 255}  # stored binary


def test_instructions_use_the_baseline_phrasings(starter_root: Path) -> None:
    allowed = {
        "perception": r"Highlight the (brain|white matter|grey matter) in (red|green|blue)\.",
        "modification": r"Remove the (lesion|nodule|tumor)\.",
        "transformation": r"(Denoise|Deblur|Enhance the contrast of) this image\.",
    }

    for s in read_native(starter_root):
        assert re.fullmatch(allowed[s.perspective.value], s.instruction), s.instruction
        if s.perspective == Perspective.perception:
            assert s.overlay_color == (s.instruction.rstrip(".").split()[-1],)


def test_perception_targets_are_the_overlay_of_input_and_mask(starter_root: Path) -> None:
    from nilearn.datasets import load_mni152_brain_mask

    for s in _by_perspective(starter_root, "perception"):
        images = load_images(s)
        (colour,) = s.overlay_color
        assert colour in OVERLAY_COLORS
        assert np.array_equal(
            images.target, blend_overlay(images.input, images.mask, colour, alpha=0.6)
        )
        assert np.array_equal(images.input, _original(s))
    first = read_native(starter_root).get("perception-000")  # brain mask, from nilearn directly
    brain = (
        read_nifti_slice(
            load_mni152_brain_mask(resolution=2), axis=2, index=first.metadata["slice_index"]
        )
        > 0.5
    )
    expected = _square(brain.astype(np.uint8), nearest=True).astype(bool)
    assert np.array_equal(load_images(first).mask, expected)


def test_removal_targets_are_the_original_and_change_only_the_mask(starter_root: Path) -> None:
    for s in _by_perspective(starter_root, "modification"):
        images = load_images(s)
        assert np.array_equal(images.target, _original(s)), s.sample_id
        changed = (images.input != images.target).any(axis=2)
        assert changed.any() and (changed <= images.mask).all(), s.sample_id
        assert images.mask.sum() == s.metadata["lesion_area_px"]
        r, c = s.metadata["lesion_center"]
        assert images.mask[r, c]


def test_transformation_targets_are_the_original_degraded_as_recorded(starter_root: Path) -> None:
    for s in _by_perspective(starter_root, "transformation"):
        images = load_images(s)
        original = _original(s)
        assert np.array_equal(images.target, original), s.sample_id
        gray = original[:, :, 0]
        if s.task == "denoise":
            expected = add_gaussian_noise(
                gray, s.metadata["noise_sigma"], item_rng(s.metadata["seed_key"])
            )
        elif s.task == "deblur":
            expected = gaussian_blur(gray, s.metadata["blur_sigma_px"])
        else:
            assert s.task == "enhance-contrast"
            expected = reduce_contrast(gray, s.metadata["contrast_factor"])
        assert np.array_equal(images.input[:, :, 0], expected), s.sample_id
        assert not np.array_equal(images.input, images.target)


def test_byte_identical_rebuild_and_pinned_hashes(
    starter_root: Path, starter_root_again: Path
) -> None:
    files_a = sorted(p.relative_to(starter_root) for p in starter_root.rglob("*") if p.is_file())
    files_b = sorted(
        p.relative_to(starter_root_again) for p in starter_root_again.rglob("*") if p.is_file()
    )
    assert files_a == files_b and len(files_a) == 2 + 24 * 2 + 16  # manifest, info, images, masks
    for rel in files_a:
        assert sha256_file(starter_root / rel) == sha256_file(starter_root_again / rel), rel
    assert sha256_file(starter_root / MANIFEST) == SAMPLES_JSONL_SHA256
    for name, digest in PIXEL_SHA256.items():
        assert _pixels_sha256(starter_root / "images" / f"{name}.png") == digest, name


def test_other_seed_gives_other_lesions_and_noise(tmp_path: Path, starter_root: Path) -> None:
    from medibench.synth.starter import _items

    other = {item.sample.sample_id: item for item in _items(seed=1, size=SIZE)}
    ds = read_native(starter_root)
    lesion0 = load_images(ds.get("modification-000")).mask
    assert not np.array_equal(other["modification-000"].mask, lesion0)
    assert np.array_equal(
        other["perception-000"].target, load_images(ds.get("perception-000")).target
    )
    noise0 = load_images(ds.get("transformation-000")).input
    assert not np.array_equal(np.repeat(other["transformation-000"].input[:, :, :1], 3, 2), noise0)


def test_build_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("occupied")
    with pytest.raises(DatasetError, match="exists and is not empty"):
        build_starter(tmp_path)


def test_load_dataset_starter_reads_an_existing_build(starter_root: Path) -> None:
    ds = load_dataset(f"starter:{starter_root}")
    assert ds.name == "starter" and len(ds) == 24
    assert ds.get("modification-002").instruction == "Remove the nodule."


def test_load_dataset_starter_uses_the_cache_dir(
    tmp_path: Path, starter_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDIBENCH_CACHE", str(tmp_path / "cache"))
    cache = starter_cache_dir()
    assert cache == tmp_path / "cache" / f"starter-{STARTER_VERSION}-seed0"
    assert starter_cache_dir(seed=3, size=128).name == f"starter-{STARTER_VERSION}-seed3-size128"
    shutil.copytree(starter_root, cache)  # as if built before: nothing is rebuilt
    ds = load_dataset("starter")
    assert ds.root == cache.resolve() and len(ds) == 24


def test_load_starter_refuses_another_version(tmp_path: Path, starter_root: Path) -> None:
    copy = tmp_path / "old"
    shutil.copytree(starter_root, copy)
    (copy / "starter.json").write_text(json.dumps({"version": "0", "seed": 0, "size": 256}))
    with pytest.raises(DatasetError, match="with version='0', not '1'"):
        load_starter(copy)


def test_load_starter_refuses_a_build_with_another_seed(tmp_path: Path, starter_root: Path) -> None:
    copy = tmp_path / "seed0"
    shutil.copytree(starter_root, copy)
    assert len(load_starter(copy, seed=0)) == 24 and len(load_starter(copy)) == 24
    with pytest.raises(DatasetError, match="with seed=0, not 1"):
        load_starter(copy, seed=1)
    with pytest.raises(DatasetError, match="with size=256, not 128"):
        load_dataset(f"starter:{copy}", size=128)
