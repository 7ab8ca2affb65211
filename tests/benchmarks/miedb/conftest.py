"""A small MieDB-100k benchmark folder in the official layout, built from images skimage ships.

``dataBenchmark/metadata.json`` + images, and ``eval_results/<model>/<stem>_<k>.png`` outputs:
perception samples in red, green and blue and one Multiclasses, transformation samples with
noise, one modification sample; outputs with k = 0..2, some missing (one sample has none), some
of another size, one corrupt file, one for an unknown sample and one with k = 3.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import pytest
from skimage import data

from medibench.io import write_image
from medibench.metrics import blend_overlay

MODEL = "toy-editor"


@dataclass
class Layout:
    root: Path  # the folder that holds dataBenchmark/ and eval_results/
    records: list[dict]
    corrupt: Path = field(default=None)  # type: ignore[assignment]
    resized: set[tuple[str, int]] = field(default_factory=set)  # (output stem, k)


def _ellipse(shape, centre, axes, angle=0) -> np.ndarray:
    m = np.zeros(shape, np.uint8)
    cv2.ellipse(m, centre, axes, angle, 0, 360, 1, -1)
    return m.astype(bool)


def _noisy(image: np.ndarray, sigma: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(image + rng.normal(0, sigma, image.shape), 0, 255).astype(np.uint8)


def _rgb(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    out = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
    return np.repeat(out[:, :, None], 3, axis=2) if out.ndim == 2 else out


def build_layout(root: Path) -> Layout:
    bench = root / "dataBenchmark"
    preds = root / "eval_results" / MODEL
    preds.mkdir(parents=True)
    records: list[dict] = []
    layout = Layout(root, records)

    def add(idx, category, name, inp, target, prompt, note="", folder=None):
        folder = folder or category
        in_rel, out_rel = f"{folder}/input/{name}.png", f"{folder}/output/{target[0]}.png"
        write_image(bench / in_rel, inp)
        write_image(bench / out_rel, target[1])
        records.append(
            dict(
                idx=idx,
                category=category,
                input_image=in_rel,
                output_image=out_rel,
                prompt=prompt,
                note=note,
            )
        )
        return target[0]

    def predict(stem, k, image, *, size=None):
        if size is not None:
            image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
            layout.resized.add((stem, k))
        write_image(preds / f"{stem}_{k}.png", image)

    # Perception, one colour each, at a few sizes.
    cases = [
        (0, "astro", _rgb(data.astronaut()[30:330, 100:400], (80, 64)), "red"),
        (1, "camera", _rgb(data.camera()[100:400, 100:400], (72, 72)), "green"),
        (2, "ihc", _rgb(data.immunohistochemistry(), (64, 56)), "blue"),
    ]
    for idx, name, inp, colour in cases:
        h, w = inp.shape[:2]
        label = _ellipse((h, w), (w // 2, h // 2), (w // 5, h // 4), 20)
        stem = add(
            idx,
            "Perception",
            name,
            inp,
            (f"{name}_{colour}", blend_overlay(inp, label, colour)),
            f"Segment the lesion in {colour}.",
        )
        shifted = np.roll(label, (idx + 2, -(idx + 1)), axis=(0, 1))
        grown = cv2.dilate(label.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
        outputs = {
            0: _noisy(blend_overlay(inp, shifted, colour), 4, idx),
            1: _noisy(blend_overlay(inp, grown, colour), 2, idx + 10),
            2: blend_overlay(inp, label, colour),
        }
        for k, image in outputs.items():
            if (idx, k) == (0, 0):
                continue  # first available output of sample 0 is k = 1
            size = (w + w // 2, h + h // 4) if (idx, k) in {(1, 0), (2, 1)} else None
            predict(stem, k, image, size=size)

    # Multiclasses: three colours, one label each; the file name carries no colour.
    inp = _rgb(data.coffee(), (96, 64))
    labels = [
        _ellipse((64, 96), (25, 20), (10, 8)),
        _ellipse((64, 96), (60, 35), (14, 9)),
        _ellipse((64, 96), (40, 50), (8, 6)),
    ]
    colours = ["red", "green", "blue"]
    stem = add(
        3,
        "Perception",
        "coffee",
        inp,
        ("coffee_classes", blend_overlay(inp, labels, colours)),
        "Mark the three structures.",
        note="Multiclasses",
    )
    predict(stem, 0, _noisy(blend_overlay(inp, labels[:2], colours[:2]), 3, 30))
    predict(stem, 2, blend_overlay(inp, [np.roll(m, 3, axis=1) for m in labels], colours))
    layout.corrupt = preds / f"{stem}_1.png"
    layout.corrupt.write_bytes(b"\x89PNG\r\n\x1a\n this is not an image")

    # Perception sample without any output at all.
    inp = _rgb(data.chelsea()[50:250, 100:350], (64, 52))
    label = _ellipse((52, 64), (30, 25), (12, 9))
    add(4, "perception", "cat", inp, ("cat_red", blend_overlay(inp, label, "red")), "Outline it.")

    # Transformation: denoising targets; outputs noisy, blurred, one of another size.
    for idx, name, image, seed in (
        (10, "astro_t", _rgb(data.astronaut()[200:500, 150:450], (64, 64)), 5),
        (11, "retina_t", _rgb(data.retina()[300:1100, 300:1100], (80, 72)), 6),
    ):
        target = image
        inp = _noisy(image, 12, seed)
        stem = add(idx, "Transformation", name, inp, (f"{name}_clean", target), "Remove the noise.")
        predict(stem, 0, _noisy(image, 5, seed + 1))
        predict(stem, 1, cv2.GaussianBlur(inp, (5, 5), 1.0), size=(96, 90) if idx == 11 else None)
        if idx == 10:
            predict(stem, 2, target)  # identical: PSNR inf

    # Transformation sample with no output.
    img = _rgb(data.coffee()[100:300, 200:400], (64, 64))
    add(12, "TRANSFORMATION", "coffee_t", _noisy(img, 9, 9), ("coffee_t_clean", img), "Denoise.")

    # Modification: judged, never computed.
    img = _rgb(data.chelsea(), (64, 48))
    stem = add(20, "Modification", "cat_m", img, ("cat_m", 255 - img), "Invert the image.")
    predict(stem, 0, img)

    # An output for no sample, and one with k = 3 (the official scripts read k = 0..2).
    predict("nobody_red", 0, inp)
    predict("astro_red", 3, inp[:10, :10])

    (bench / "metadata.json").write_text(json.dumps(records, indent=1))
    return layout


@pytest.fixture(scope="package")
def layout(tmp_path_factory) -> Layout:
    return build_layout(tmp_path_factory.mktemp("miedb"))


@pytest.fixture
def write_metadata(tmp_path):
    """Write ``dataBenchmark/metadata.json`` (any JSON value) plus two small images; return root."""

    def write(value, images=("a/in.png", "a/out_red.png", "a/out.png")) -> Path:
        bench = tmp_path / "dataBenchmark"
        rgb = np.full((16, 16, 3), 90, np.uint8)
        for rel in images:
            write_image(bench / rel, rgb)
        (bench / "metadata.json").write_text(value if isinstance(value, str) else json.dumps(value))
        return tmp_path

    return write
