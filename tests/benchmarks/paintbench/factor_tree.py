"""A PaintBench tree whose problems vary along the paper's diagnostic factors, with two models'
outputs that degrade as the edit region grows (the ``--by-bins`` tests and docs/protocols.md's
edit-region-size block, through tests/docs/standins/paintbench.py).

``<root>/PaintBench/<task>/NNN_input.png, NNN_answer.png, NNN.json``: tasks ``recolor``,
``removal`` and ``translation``; per task 3 problems in each of the conditions ``baseline``,
``n_med`` (more objects), ``striped`` (a striped background) and ``nonstandard`` (another
palette), 36 problems of 32x32 pixels. Each input is a background with ``n`` one-pixel-bordered
squares; the answer paints one square of side 2, 4, 8 or 16 (cycling over the problems: an edit
region of 4, 16, 64 or 256 of the 1024 pixels, 0.4% to 25%).

``<root>/model_outputs/<model>/PaintBench/<task>/NNNN_output.png``: ``careful`` paints the first
48 +- 24 pixels of each edit region (row order; the number drawn per problem) and leaves the rest
as the input; ``hasty`` the first 12 +- 6. So each gets small regions right and less of a larger
one.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

SIZE = 32
TASKS = {
    "recolor": "color_change",
    "removal": "structural_manipulation",
    "translation": "geometric_transformation",
}
CONDITIONS = ("baseline", "n_med", "striped", "nonstandard")
#: Pixels of the edit region each model paints (the rest stays as the input).
BUDGETS = {"careful": 48, "hasty": 12}
SIDES = (2, 4, 8, 16)
_PALETTES = {
    "standard": [(255, 0, 0), (0, 160, 0), (0, 0, 255), (255, 200, 0)],
    "nonstandard": [(120, 60, 140), (30, 130, 120), (200, 120, 90), (90, 90, 40)],
}


def build_factor_tree(root: Path) -> dict[str, Path]:
    """Write the tree and the outputs under ``root``; return ``{"bench", "outputs"}``."""
    bench = root / "PaintBench"
    outputs = root / "model_outputs"
    k = 0
    for task, category in TASKS.items():
        pid = 0
        for condition in CONDITIONS:
            for _slot in range(3):
                inp, ans, n = _problem(condition, k)
                folder = bench / task
                _save(folder / f"{pid:03d}_input.png", inp)
                _save(folder / f"{pid:03d}_answer.png", ans)
                meta = {
                    "instruction": f"Do the {task} edit.",
                    "category": category,
                    "task": task,
                    "mode": "default",
                    "visual_condition": condition,
                    "problem_id": pid,
                    "seed": 1000 + k,
                    "n": n,
                    "W": SIZE,
                    "H": SIZE,
                }
                (folder / f"{pid:03d}.json").write_text(json.dumps(meta), encoding="utf-8")
                rng = np.random.default_rng(10_000 + k)
                for model, budget in BUDGETS.items():
                    out = outputs / model / "PaintBench" / task / f"{pid:04d}_output.png"
                    drawn = budget + int(rng.integers(-(budget // 2), budget // 2 + 1))
                    _save(out, _painted(inp, ans, drawn))
                pid += 1
                k += 1
    return {"bench": bench, "outputs": outputs}


def edit_fraction(k: int) -> float:
    """The edit region's share of the image in the ``k``-th problem written."""
    return SIDES[k % len(SIDES)] ** 2 / SIZE**2


def _problem(condition: str, k: int) -> tuple[np.ndarray, np.ndarray, int]:
    palette = _PALETTES["nonstandard" if condition == "nonstandard" else "standard"]
    n = 10 if condition == "n_med" else 3
    image = np.full((SIZE, SIZE, 3), 20, np.uint8)
    if condition == "striped":
        image[::4] = (60, 60, 60)
    rng = np.random.default_rng(k)
    for i in range(n):
        y, x = rng.integers(0, SIZE - 3, size=2)
        image[y : y + 3, x : x + 3] = palette[i % len(palette)]
    answer = image.copy()
    side = SIDES[k % len(SIDES)]
    y, x = rng.integers(0, SIZE - side + 1, size=2)
    answer[y : y + side, x : x + side] = (250, 250, 250)  # no input pixel is this colour
    return image, answer, n


def _painted(inp: np.ndarray, ans: np.ndarray, budget: int) -> np.ndarray:
    out = inp.copy()
    ys, xs = np.nonzero((inp != ans).any(axis=2))
    out[ys[:budget], xs[:budget]] = ans[ys[:budget], xs[:budget]]
    return out


def _save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)
