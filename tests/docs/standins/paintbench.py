"""Stand-ins for docs/protocols.md's PaintBench diagnostics block (edit-region size).

``PaintBench/`` (the benchmark) and ``model_outputs/`` (the user's models' outputs) are the
factor tree of tests/benchmarks/paintbench/factor_tree.py: 36 problems of 32x32 pixels whose edit
regions cover 0.4%, 1.6%, 6.25% or 25% of the image, and two models that paint at most a few
dozen pixels of each region. The block runs as written; the check holds its outputs to the
statistic the page names: per-bin means, intervals and Spearman's rho with its p-value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.docs.standins import ALL

SUBSTITUTIONS: dict[tuple[str, str], tuple[str, str]] = {}


@contextmanager
def standins(
    file: str, work: Path, env: dict[str, str], cache: Path, blocks: frozenset[int] = ALL
) -> Iterator[None]:
    if file == "docs/protocols.md":
        from tests.benchmarks.paintbench.factor_tree import build_factor_tree

        build_factor_tree(work)
    yield


def check(file: str, blocks: frozenset[int], work: Path) -> None:
    """docs/protocols.md: ``pb_bins.json`` holds a row per model and bin (9 problems each, the
    smallest regions painted whole) and Spearman rows whose rho is negative (the scores fall as
    the region grows) with a p-value below 0.001; the report has the section, table and figure
    the page names."""
    if file != "docs/protocols.md":
        return
    rows = json.loads((work / "pb_bins.json").read_text(encoding="utf-8"))
    bins = [r for r in rows if r["by"] == "mask_fraction" and r["group"] != "trend"]
    trend = [r for r in rows if r["by"] == "mask_fraction" and r["group"] == "trend"]
    assert sorted({r["model"] for r in bins}) == ["careful", "hasty"]
    assert all(r["n"] == 9 for r in bins)
    assert all(r["iou"] == 1.0 for r in bins if r["group"] == "[0, 0.01)")
    iou = {r["model"]: r for r in trend if r["metric"] == "iou"}
    assert all(t["rho"] < 0 and t["p"] < 1e-3 and t["n"] == 36 for t in iou.values())
    report = work / "pb.run" / "report"
    assert "Diagnostics by factor" in (report / "index.html").read_text(encoding="utf-8")
    assert (report / "plots" / "paintbench@1" / "bins_mask_fraction.png").is_file()
    assert (report / "tables" / "paintbench@1" / "bins_mask_fraction.md").is_file()
