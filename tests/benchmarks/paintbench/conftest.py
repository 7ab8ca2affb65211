"""A small PaintBench benchmark in the official layout, from images scikit-image ships.

``benchmarks/PaintBench/<task>/NNN_input.png, NNN_answer.png, NNN.json`` (48x64 crops):

recolor/000 astronaut, a rectangle recoloured    recolor/001 coffee, a rectangle recoloured
recolor/002 answer missing (reported)            removal/000 chelsea, a rectangle filled
removal/001 JSON not valid (reported)            removal/002 JSON a list (reported)
translation/000 immunohistochemistry, a block moved
translation/001 category "astrology" (kept, reported)
translation/002 no JSON; instruction from problems.jsonl
counting/000 camera (grey), a square painted     mystery/000 no category anywhere (skipped)
preservation/000 the diagnostic task (skipped unless asked)

``model_outputs/modelA/PaintBench/<task>/NNNN_output.png``: recolor 0000 = answer, 0001 = the
input unchanged; removal 0000 = answer + noise; translation 0000 = answer at 2x (nearest),
0001 = answer + noise, 0002 missing; counting 0000 = a noisy answer at 72x96 (1.5x). Files the
official eval does not open: recolor/001_output.png (3 digits), recolor/0099_output.png (no such
problem), ghost/0000_output.png (no such task). modelB has TinyGrafixBench outputs only.
"""

import json

import cv2
import numpy as np
import pytest
from PIL import Image
from skimage import data as skdata

H, W = 48, 64


def _crop(image):
    image = image if image.ndim == 3 else np.repeat(image[:, :, None], 3, axis=2)
    return cv2.resize(image[:, :, :3], (W, H), interpolation=cv2.INTER_AREA)


def _save(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def _meta(task, pid, category, **extra):
    return {
        "instruction": f"Do the {task} edit.",
        "bg_color": [10, 20, 30],
        "category": category,
        "task": task,
        "mode": "default",
        "visual_condition": "baseline",
        "problem_id": pid,
        "seed": 1234 + pid,
        "n": 3,
        "W": W,
        "H": H,
        **extra,
    }


def _noisy(image, amount, rng):
    out = image.astype(np.int16) + rng.integers(-amount, amount + 1, image.shape)
    return np.clip(out, 0, 255).astype(np.uint8)


def build_paintbench(tmp):
    rng = np.random.default_rng(11)
    bench = tmp / "benchmarks" / "PaintBench"
    answers = {}

    def problem(task, pid, inp, ans, meta):
        folder = bench / task
        _save(folder / f"{pid:03d}_input.png", inp)
        if ans is not None:
            _save(folder / f"{pid:03d}_answer.png", ans)
            answers[(task, pid)] = (inp, ans)
        if meta is not None:
            text = meta if isinstance(meta, str) else json.dumps(meta, indent=2)
            (folder / f"{pid:03d}.json").write_text(text)

    astro, coffee, cat = _crop(skdata.astronaut()), _crop(skdata.coffee()), _crop(skdata.chelsea())
    ihc, cam = _crop(skdata.immunohistochemistry()), _crop(skdata.camera())

    a = astro.copy()
    a[10:30, 10:40] = (200, 30, 30)
    problem("recolor", 0, astro, a, _meta("recolor", 0, "color_change"))
    c = coffee.copy()
    c[5:25, 30:60] = (20, 180, 90)
    problem("recolor", 1, coffee, c, _meta("recolor", 1, "color_change"))
    problem("recolor", 2, coffee, None, _meta("recolor", 2, "color_change"))
    r = cat.copy()
    r[12:36, 20:44] = (10, 20, 30)
    problem("removal", 0, cat, r, _meta("removal", 0, "structural_manipulation"))
    problem("removal", 1, cat, r, '{"instruction": "Remove it", ')
    problem("removal", 2, cat, r, json.dumps(["not", "an", "object"]))
    t = ihc.copy()
    t[20:40, 30:50] = ihc[5:25, 5:25]
    problem("translation", 0, ihc, t, _meta("translation", 0, "geometric_transformation"))
    problem("translation", 1, ihc, t, _meta("translation", 1, "astrology"))
    problem("translation", 2, ihc, t, None)
    n = cam.copy()
    n[8:24, 8:24] = (250, 250, 0)
    problem("counting", 0, cam, n, _meta("counting", 0, "symbolic_reasoning"))
    problem("mystery", 0, cam, n, {"instruction": "Something."})
    problem("preservation", 0, cat, cat, {"instruction": "Same.", "task": "preservation"})
    (bench / "problems.jsonl").write_text(
        json.dumps({"task": "translation", "problem_id": 2, "instruction": "Move the block."})
        + "\n"
    )

    outs = tmp / "model_outputs"
    a_dir = outs / "modelA" / "PaintBench"
    _save(a_dir / "recolor" / "0000_output.png", a)
    _save(a_dir / "recolor" / "0001_output.png", coffee)
    _save(a_dir / "removal" / "0000_output.png", _noisy(r, 3, rng))
    big = cv2.resize(t, (2 * W, 2 * H), interpolation=cv2.INTER_NEAREST)
    _save(a_dir / "translation" / "0000_output.png", big)
    _save(a_dir / "translation" / "0001_output.png", _noisy(t, 2, rng))
    odd = cv2.resize(_noisy(n, 2, rng), (96, 72), interpolation=cv2.INTER_LINEAR)
    _save(a_dir / "counting" / "0000_output.png", odd)
    _save(a_dir / "recolor" / "001_output.png", c)
    _save(a_dir / "recolor" / "0099_output.png", c)
    _save(a_dir / "ghost" / "0000_output.png", c)
    _save(outs / "modelB" / "TinyGrafixBench" / "bar_chart_x" / "0000_output.png", c)
    return {"bench": bench, "outputs": outs, "answers": answers}


@pytest.fixture(scope="session")
def paint_tree(tmp_path_factory):
    return build_paintbench(tmp_path_factory.mktemp("paintbench"))
