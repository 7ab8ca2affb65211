"""A small MedEBench repository in the official layout, built from images that packages ship.

Samples (id: region, source image, input size HxW, mask, predictions of modelA):

1: Teeth, camera (grey PNG), 80x96, binary 0/255 mask; 1_0 at 112x128, 1_1 (not scored)
2: Eyes, retina, 100x72, grey-level mask (0/128/255) stored at half size; 2_0 at 60x90
3: "Gastrointestinal Tract", astronaut, 90x110, RGB mask; truncated rephrasing; 3_0 RGBA
4: Skin, immunohistochemistry, 64x64, previous_mask listed but the file is missing
5: Torso, chest X-ray (pydicom RG1_UNCR), 96x96, large ROI; 5_0 unrelated noise

modelB has 1_0 and 2_0 only; modelA also has 999_0.png, an id not in the benchmark.
"""

import json

import cv2
import numpy as np
import pytest
from PIL import Image
from pydicom.data import get_testdata_file
from skimage import data as skdata

from medibench.io import read_dicom

RNG_SEED = 7


def _small(image: np.ndarray, h: int, w: int) -> np.ndarray:
    return cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA)


def _save(path, array, mode=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array, mode).save(path) if mode else Image.fromarray(array).save(path)


def _rect_mask(h, w, y0, y1, x0, x1):
    m = np.zeros((h, w), np.uint8)
    m[y0:y1, x0:x1] = 255
    return m


def _record(sid, organ, task, prompt, rephrased, detailed):
    return {
        "id": sid,
        "Organ": organ,
        "Task": task,
        "prompt": prompt,
        "rephrased_prompt": rephrased,
        "detailed_prompt": detailed,
        "previous_image": f"editing/previous/{sid}.png",
        "changed_image": f"editing/changed/{sid}.png",
        "previous_mask": f"editing/previous_mask/{sid}.png",
        "url": f"https://example.org/{sid}.jpg",
    }


def _edit(image: np.ndarray, mask: np.ndarray, rng) -> np.ndarray:
    """The 'changed' image: the ROI darkened and textured, the rest untouched."""
    out = image.astype(np.int16)
    inside = mask > 0
    out[inside] = out[inside] // 2 + rng.integers(0, 40, out[inside].shape)
    return np.clip(out, 0, 255).astype(np.uint8)


def _predict(changed: np.ndarray, h: int, w: int, rng) -> np.ndarray:
    """A model output of another size: the ground truth resized, with some noise."""
    out = cv2.resize(changed, (w, h), interpolation=cv2.INTER_LINEAR).astype(np.int16)
    out += rng.integers(-12, 13, out.shape)
    return np.clip(out, 0, 255).astype(np.uint8)


def build_medebench(root):
    rng = np.random.default_rng(RNG_SEED)
    ed = root / "editing"
    gen = root / "generated_images"
    records = []

    # 1: Teeth, grey camera image, binary mask, prediction larger than the input.
    cam = _small(skdata.camera(), 80, 96)
    m1 = _rect_mask(80, 96, 20, 50, 30, 70)
    ch1 = _edit(cam, m1, rng)
    _save(ed / "previous/1.png", cam)
    _save(ed / "changed/1.png", ch1)
    _save(ed / "previous_mask/1.png", m1)
    _save(gen / "modelA/1_0.png", _predict(np.dstack([ch1] * 3), 112, 128, rng))
    _save(gen / "modelA/1_1.png", np.dstack([cam] * 3))
    _save(gen / "modelB/1_0.png", np.dstack([cam] * 3))
    records.append(
        _record(
            1,
            "Teeth",
            "Remove wisdom teeth.",
            "Remove the wisdom teeth, keeping the rest of the image unchanged.",
            "Take out the wisdom teeth while leaving the rest of the image as it is",
            "The image modality is a panoramic dental X-ray; the wisdom teeth were removed.",
        )
    )

    # 2: Eyes, retina, grey-level mask stored at half the input size.
    ret = _small(skdata.retina(), 100, 72)
    m2 = np.zeros((50, 36), np.uint8)
    cv2.circle(m2, (18, 25), 12, 128, -1)
    cv2.circle(m2, (18, 25), 8, 255, -1)
    m2_full = cv2.resize(m2, (72, 100), interpolation=cv2.INTER_NEAREST)
    ch2 = _edit(ret, m2_full, rng)
    _save(ed / "previous/2.png", ret)
    _save(ed / "changed/2.png", ch2)
    _save(ed / "previous_mask/2.png", m2)
    _save(gen / "modelA/2_0.png", _predict(ch2, 60, 90, rng))
    _save(gen / "modelB/2_0.png", _predict(ch2, 100, 72, rng))
    records.append(
        _record(
            2,
            "Eyes",
            "Remove cataract.",
            "Remove the cataract.",
            "Remove the cataract.",
            "The image modality is a fundus photograph; the lesion was removed.",
        )
    )

    # 3: GI tract (official spelling), astronaut, RGB mask, truncated rephrasing, RGBA output.
    ast = _small(skdata.astronaut(), 90, 110)
    m3 = np.zeros((90, 110), np.uint8)
    cv2.ellipse(m3, (55, 40), (25, 18), 0, 0, 360, 255, -1)
    ch3 = _edit(ast, m3, rng)
    _save(ed / "previous/3.png", ast)
    _save(ed / "changed/3.png", ch3)
    _save(ed / "previous_mask/3.png", np.dstack([m3] * 3))
    pred3 = _predict(ch3, 90, 110, rng)
    _save(gen / "modelA/3_0.png", np.dstack([pred3, np.full((90, 110), 200, np.uint8)]))
    records.append(
        _record(
            3,
            "Gastrointestinal Tract",
            "Remove anal warts.",
            "Remove the mole on chin.",
            "Get rid of the mole on the",
            "The image modality is clinical photography; the wart was removed.",
        )
    )

    # 4: Skin, no mask file although the metadata lists one.
    ihc = _small(skdata.immunohistochemistry(), 64, 64)
    _save(ed / "previous/4.png", ihc)
    _save(ed / "changed/4.png", _edit(ihc, _rect_mask(64, 64, 10, 30, 10, 30), rng))
    _save(gen / "modelA/4_0.png", ihc)
    records.append(
        _record(
            4,
            "Skin",
            "Remove moles, nevi, or black marks.",
            "Remove the mole.",
            "Get rid of the mole",
            "The image modality is a clinical photograph; the mole was removed.",
        )
    )

    # 5: Torso, chest X-ray from pydicom, a large ROI, an unrelated-noise prediction.
    xray = _small(read_dicom(get_testdata_file("RG1_UNCR.dcm")), 96, 96)
    m5 = _rect_mask(96, 96, 8, 88, 8, 88)
    _save(ed / "previous/5.png", xray)
    _save(ed / "changed/5.png", _edit(xray, m5, rng))
    _save(ed / "previous_mask/5.png", m5)
    _save(gen / "modelA/5_0.png", rng.integers(0, 256, (96, 96, 3), dtype=np.uint8))
    records.append(
        _record(
            5,
            "Torso",
            "Perform body liposuction and skin tightening.",
            "Perform liposuction to remove excess fat.",
            "Conduct lipos",
            "The image is a chest radiograph; the fat was reduced.",
        )
    )

    _save(gen / "modelA/999_0.png", cam)
    (ed / "editing_metadata.json").write_text(json.dumps({"samples": records}, indent=2))
    return root


@pytest.fixture(scope="module")
def medebench_root(tmp_path_factory):
    return build_medebench(tmp_path_factory.mktemp("MedEBench"))


def write_metadata(root, content):
    """Write ``content`` (JSON-encoded unless it is a str) as the metadata under ``root``."""
    path = root / "editing" / "editing_metadata.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path
