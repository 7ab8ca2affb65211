"""A small MedGEN-Bench evaluation folder in the official layout, from images packages ship.

``MedGEN_data/`` (what eval.py's --data_path points at) holds edit.jsonl, vqa.jsonl, gen.jsonl
and ``source`` -> ``../MedGEN_raw`` (a symbolic link, as prepare_medgen_data.py makes it).

edit.jsonl lines (sample_id ``medgen:ImageEditing:<task>:<line>``):

1 style-transfer, astronaut 64x64 RGB, singular + plural image fields
2 artifact-removal, camera 48x56 grayscale PNG
3 anatomical-annotation, retina 64x64 with a red overlay in the ground truth
4 organic-removal, chest X-ray (pydicom RG1_UNCR) 64x64; canonical list fields, 2 inputs
5 dye-transfer (alias of style-transfer), immunohistochemistry 64x64
6 unknown task "teleportation": kept as modification, reported
7 no ground truth: skipped          8 category VQA: skipped
9 ground-truth file missing: skipped    10 same sample_id as line 1: skipped

Outputs: ``repo/inference_jsonl/qwen3-vl_gpt-image-1_edit.jsonl`` (official inference output,
``output_image`` relative to ``repo/``): line 1 = its ground truth (PSNR cap), 2 = ground truth
at 72x84 (LANCZOS resize), 3 = noisy, 4 = an error record (no output), 5 = a path that does not
exist, plus a record for an unknown id. ``pngs/modelB/`` holds medibench-style PNGs.
"""

import json
import os

import cv2
import numpy as np
import pytest
from PIL import Image
from pydicom.data import get_testdata_file
from skimage import data as skdata

from medibench.io import read_dicom


def _small(image, h, w):
    return cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA)


def _save(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def _sid(task, line):
    return f"medgen:ImageEditing:{task}:{line:06d}"


def _noisy(image, amount, rng):
    out = image.astype(np.int16) + rng.integers(-amount, amount + 1, image.shape)
    return np.clip(out, 0, 255).astype(np.uint8)


def build_medgen(tmp):
    rng = np.random.default_rng(3)
    raw = tmp / "MedGEN_raw" / "ImageEditing"
    data = tmp / "MedGEN_data"
    data.mkdir(parents=True)
    os.symlink(os.path.relpath(tmp / "MedGEN_raw", data), data / "source")

    astro = _small(skdata.astronaut(), 64, 64)
    camera = _small(skdata.camera(), 48, 56)
    retina = _small(skdata.retina(), 64, 64)
    xray = _small(read_dicom(get_testdata_file("RG1_UNCR.dcm")), 64, 64)
    ihc = _small(skdata.immunohistochemistry(), 64, 64)

    styled = astro[:, :, ::-1].copy()  # channels swapped: a "style"
    cleaned = cv2.GaussianBlur(camera, (5, 5), 0)
    overlay = retina.copy()
    overlay[20:40, 24:44] = (0.4 * overlay[20:40, 24:44] + 0.6 * np.array([255, 0, 0])).astype(
        np.uint8
    )
    removed = xray.copy()
    removed[20:44, 20:44] = int(xray.mean())
    dyed = 255 - ihc

    pairs = {
        "style-transfer/in_1.png": astro,
        "style-transfer/gt_1.png": styled,
        "artifact-removal/in_2.png": camera,
        "artifact-removal/gt_2.png": cleaned,
        "anatomical-annotation/in_3.png": retina,
        "anatomical-annotation/gt_3.png": overlay,
        "organic-removal/in_4a.png": xray,
        "organic-removal/in_4b.png": xray[::-1].copy(),
        "organic-removal/gt_4.png": removed,
        "dye-transfer/in_5.png": ihc,
        "dye-transfer/gt_5.png": dyed,
        "teleportation/in_6.png": astro,
        "teleportation/gt_6.png": styled,
        "style-transfer/in_7.png": astro,
        "style-transfer/in_9.png": astro,
    }
    for rel, arr in pairs.items():
        _save(raw / rel, arr)

    def src(rel):
        return f"source/ImageEditing/{rel}"

    def rec(line, task, inp, gt, **extra):
        r = {
            "category": "ImageEdit",
            "paper_format": "ImageEditing",
            "paper_task": task,
            "instruction": f"Edit the image for {task}.",
            "answer": f"The expected result of {task}.",
            "choice": [],
            "modality": "CT",
            "sample_id": _sid(task, line),
        }
        if inp is not None:
            r["input_image"] = inp
            r["input_images"] = [inp] if isinstance(inp, str) else inp
        if gt is not None:
            r["ground_truth_image"] = gt
            r["ground_truth_images"] = [gt] if isinstance(gt, str) else gt
        r.update(extra)
        return r

    records = [
        rec(1, "style-transfer", src("style-transfer/in_1.png"), src("style-transfer/gt_1.png")),
        rec(
            2,
            "artifact-removal",
            src("artifact-removal/in_2.png"),
            src("artifact-removal/gt_2.png"),
            modality="MRI",
        ),
        rec(
            3,
            "anatomical-annotation",
            src("anatomical-annotation/in_3.png"),
            src("anatomical-annotation/gt_3.png"),
            modality="Fundus",
            answer={"finding": "optic disc", "location": "centre"},
        ),
        rec(
            4,
            "organic-removal",
            [src("organic-removal/in_4a.png"), src("organic-removal/in_4b.png")],
            [src("organic-removal/gt_4.png")],
            modality="X-ray",
        ),
        rec(5, "dye-transfer", src("dye-transfer/in_5.png"), src("dye-transfer/gt_5.png")),
        rec(6, "teleportation", src("teleportation/in_6.png"), src("teleportation/gt_6.png")),
        rec(7, "style-transfer", src("style-transfer/in_7.png"), None),
        rec(8, "style-transfer", src("style-transfer/in_1.png"), src("style-transfer/gt_1.png"))
        | {"category": "VQA"},
        rec(9, "style-transfer", src("style-transfer/in_9.png"), src("style-transfer/gt_9.png")),
        rec(1, "style-transfer", src("style-transfer/in_1.png"), src("style-transfer/gt_1.png")),
    ]
    # Line 4 uses only the canonical list fields.
    del records[3]["input_images"], records[3]["ground_truth_images"]
    (data / "edit.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (data / "vqa.jsonl").write_text(
        json.dumps({"category": "VQA", "paper_task": "multiple-choice", "sample_id": "q1"}) + "\n"
    )
    (data / "gen.jsonl").write_text(
        json.dumps({"category": "MMGeneration", "paper_task": "report-generation"})
        + "\n"
        + json.dumps({"category": "MMGeneration", "paper_task": "disease-prediction"})
        + "\n"
    )

    # Official inference output: the benchmark records plus output_image and response.
    repo = tmp / "repo"
    outs = {
        1: styled,
        2: cv2.resize(cleaned, (84, 72), interpolation=cv2.INTER_CUBIC),
        3: _noisy(overlay, 20, rng),
        6: _noisy(styled, 6, rng),
    }
    results = []
    for line, arr in outs.items():
        _save(repo / "output_image" / f"out_{line}.png", arr)
    task_of = {
        1: "style-transfer",
        2: "artifact-removal",
        3: "anatomical-annotation",
        4: "organic-removal",
        5: "dye-transfer",
        6: "teleportation",
    }
    for line in (1, 2, 3, 6):
        results.append(
            records[line - 1] | {"response": "ok", "output_image": f"output_image/out_{line}.png"}
        )
    results.append(records[3] | {"response": "", "output_image": "", "error": "timeout"})
    results.append(records[4] | {"response": "ok", "output_image": "output_image/lost_5.png"})
    results.append(
        {
            "sample_id": "medgen:ImageEditing:style-transfer:999999",
            "output_image": "output_image/out_1.png",
        }
    )
    jsonl = repo / "inference_jsonl" / "qwen3-vl_gpt-image-1_edit.jsonl"
    jsonl.parent.mkdir(parents=True)
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in results))

    # medibench's own layout for a second model: safe id, original id with ':', unknown id.
    pngs = tmp / "pngs" / "modelB"
    _save(pngs / "medgen-ImageEditing-style-transfer-000001_0.png", _noisy(styled, 4, rng))
    _save(pngs / f"{_sid('artifact-removal', 2)}_0.png", cleaned)
    _save(pngs / "nobody_0.png", cleaned)
    return {"data": data, "repo": repo, "jsonl": jsonl, "pngs": pngs.parent, "task_of": task_of}


@pytest.fixture(scope="session")
def medgen_tree(tmp_path_factory):
    return build_medgen(tmp_path_factory.mktemp("medgen"))
