"""The figures of docs/check_numbers.py that come from examples the documented blocks run: the
MNI152 calibration table (README block 11, docs/calibration.md block 1), its margin analysis
(docs/calibration.md block 3), the prompt-tuning table (docs/calibration.md block 2) and the
demo build's Dice (README block 9). ``python
docs/numbers.py --check --slow`` runs those examples itself; in the tests they run once, as the
blocks, and :func:`check` holds the docs to the figures made from the blocks' outputs (the same
functions of docs/check_numbers.py). tests/docs/test_numbers.py leaves these checks out."""

from __future__ import annotations

import json
from pathlib import Path

#: check name (docs/check_numbers.py) -> the blocks whose output makes its figures: ``{(file,
#: block): output}``, and the function of docs/check_numbers.py that makes them from it.
CHECKED = {
    "MNI152 calibration example": (
        {("README.md", 11): "mni/summary.json", ("docs/calibration.md", 1): "mni/summary.json"},
        "mni152_figures",
    ),
    "MNI152 margin analysis": (
        {("docs/calibration.md", 3): "mni/margins.json"},
        "mni152_margin_figures",
    ),
    "prompt-tuning example": (
        {("docs/calibration.md", 2): "pt/probe/scores.json"},
        "prompt_tuning_figures",
    ),
    "build demo Dice": (
        {("README.md", 9): "built/perception/report/quality.json"},
        "demo_dice_figures",
    ),
}


def check(file: str, blocks: frozenset[int], work: Path) -> None:
    from tests.docs._figures import check_numbers

    numbers = check_numbers()
    for name, (outputs, make) in CHECKED.items():
        for (doc, block), output in outputs.items():
            if doc == file and block in blocks:
                made = getattr(numbers, make)(json.loads((work / output).read_text()))
                assert made and not numbers.figure_problems(name, made), "\n".join(
                    numbers.figure_problems(name, made)
                )
