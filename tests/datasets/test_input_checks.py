"""Issue 10, item 6 at the dataset and protocol level: RGBA inputs and JPEG masks are noted in
the scores, a size mismatch names the sample, both files and their roles, and an empty dataset
is an error naming its file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from medibench.datasets import MANIFEST, DatasetError, load_dataset, load_images, read_native
from medibench.io import read_image, write_image
from medibench.protocols import load_protocol
from medibench.samples import Perspective

RNG = np.random.default_rng(10)


def _native(folder: Path, *, input_image, target, mask_suffix=".png") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_image(folder / "images/x_input.png", input_image)
    write_image(folder / "images/x_target.png", target)
    plane = np.zeros((32, 32), np.uint8)
    plane[9:23, 9:23] = 255  # 196 px
    write_image(folder / f"images/x_mask{mask_suffix}", plane)
    record = {
        "sample_id": "modification-003",
        "benchmark": "toy",
        "instruction": "Remove the lesion.",
        "perspective": "modification",
        "input": "images/x_input.png",
        "target": "images/x_target.png",
        "mask": f"images/x_mask{mask_suffix}",
    }
    (folder / MANIFEST).write_text(json.dumps(record) + "\n")
    return folder


def _rgb(h=32, w=32):
    return RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_rgba_input_and_jpeg_mask_are_noted_in_every_score(tmp_path):
    rgba = np.dstack([_rgb(), np.full((32, 32), 255, np.uint8)])
    rgba[:4, :, 3] = 0  # 128 transparent pixels
    ds = read_native(_native(tmp_path, input_image=rgba, target=_rgb(), mask_suffix=".jpg"))
    sample = ds.get("modification-003")
    images = load_images(sample)
    assert images.input[:4].max() == 0  # composited on black, not the stored colours
    assert int(images.mask.sum()) == 196  # any non-zero pixel would have grown the ROI
    raw = read_image(sample.mask, mode="unchanged")
    halo = int(np.count_nonzero((raw != 0) & (raw != 255)))
    assert images.notes[0] == (
        f"input {sample.input}: 128 of 1024 pixels are not opaque (alpha < 255); "
        "composited on black"
    )
    assert images.notes[1].startswith(
        f"mask {sample.mask}: {halo} pixels have values other than 0 and its maximum 255"
    )
    nonzero = np.count_nonzero(raw)
    assert images.notes[1].endswith(f"196 pixels inside ({nonzero} would be non-zero)")
    native = load_protocol("native@1")
    res = native.score(sample, native.load_images(sample), images.input)
    assert res.notes[:2] == list(images.notes)
    # the corrected protocols of the official layouts read masks the same way
    for spec in ("medebench@1", "miedb@1"):
        assert int(load_protocol(spec).load_images(sample).mask.sum()) == 196, spec
    assert res.metrics["cp"] == pytest.approx(1.0)  # prediction = input: nothing changed


def test_rgba_prediction_is_composited_with_a_note(tmp_path):
    ds = read_native(_native(tmp_path / "d", input_image=_rgb(), target=_rgb()))
    sample = ds.get("modification-003")
    pred = np.dstack([_rgb(), np.full((32, 32), 255, np.uint8)])
    pred[0, 0, 3] = 0
    path = write_image(tmp_path / "pred.png", pred)
    # miedb@1 scores pixels of perception and transformation samples only
    transformation = sample.model_copy(update={"perspective": Perspective.transformation})
    for spec, case in (
        ("native@1", sample),
        ("medebench@1", sample),
        ("miedb@1", transformation),
    ):
        proto = load_protocol(spec)
        res = proto.score(case, proto.load_images(case), proto.read_prediction(path))
        assert "prediction: 1 of 1024 pixels are not opaque (alpha < 255); composited on black" in (
            res.notes
        ), spec


def test_target_of_another_size_names_the_sample_files_and_roles(tmp_path):
    ds = read_native(_native(tmp_path, input_image=_rgb(), target=_rgb(24, 32)))
    sample = ds.get("modification-003")
    images = load_images(sample)
    res = load_protocol("native@1").score(sample, images, images.input)
    expected = (
        "sample modification-003: the target is 32x24 but the input is 32x32 "
        f"(target {sample.target}, input {sample.input})"
    )
    for metric in ("ssim", "psnr", "roi_ssim"):
        assert res.metrics[metric] is None and res.reasons[metric] == expected
    assert res.metrics["cp"] == pytest.approx(1.0)  # what does not need the target is scored
    assert str(Path(sample.target).relative_to(tmp_path)) == "images/x_target.png"


def test_mask_of_another_size_names_it(tmp_path):
    folder = _native(tmp_path, input_image=_rgb(), target=_rgb())
    write_image(folder / "images/x_mask.png", np.zeros((16, 32), np.uint8))
    sample = read_native(folder).get("modification-003")
    res = load_protocol("native@1").score(sample, load_images(sample), _rgb())
    assert res.reasons["cp"] == (
        "sample modification-003: the mask is 32x16 but the input is 32x32 "
        f"(mask {sample.mask}, input {sample.input})"
    )
    assert res.metrics["ssim"] is not None


def test_empty_native_manifest_is_an_error_naming_it(tmp_path):
    (tmp_path / MANIFEST).write_text("\n\n")
    with pytest.raises(DatasetError) as err:
        load_dataset(f"native:{tmp_path}")
    assert str(err.value) == (
        f"{tmp_path / MANIFEST}: the dataset has no samples (the file lists none)"
    )


def test_official_layouts_with_zero_samples_are_errors(tmp_path):
    med = tmp_path / "MedEBench" / "editing"
    med.mkdir(parents=True)
    (med / "editing_metadata.json").write_text(json.dumps({"samples": []}))
    with pytest.raises(DatasetError, match=r"editing_metadata.json: the dataset has no samples"):
        load_dataset(f"medebench:{tmp_path / 'MedEBench'}")
    mie = tmp_path / "MieDB" / "dataBenchmark"
    mie.mkdir(parents=True)
    (mie / "metadata.json").write_text("[]")
    with pytest.raises(DatasetError, match=r"metadata.json: the dataset has no samples"):
        load_dataset(f"miedb:{tmp_path / 'MieDB'}")
    gen = tmp_path / "MedGEN"
    gen.mkdir()
    (gen / "edit.jsonl").write_text(
        json.dumps({"category": "VQA", "sample_id": "q1", "instruction": "?"}) + "\n"
    )
    with pytest.raises(DatasetError) as err:
        load_dataset(f"medgen:{gen}")
    assert str(err.value).startswith(f"{gen / 'edit.jsonl'}: the dataset has no samples: every")
    assert "category 'VQA' is not ImageEdit" in str(err.value)
