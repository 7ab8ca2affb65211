"""Stand-ins for README's `make` commands, docs/benchmarks.md's plug-in example, docs/build.md
and docs/knowledge_edit.md.

- README block 1: ``make demo`` creates a virtual environment and installs the package; here it
  is the command the ``demo`` target runs (on the 66-sample suite), with a check that the files
  the README names are there. ``make test`` is the suite this test is part of: dropped.
- docs/benchmarks.md: the example package ``toy-pkg`` (its files copied out of the page) is
  pip-installed, offline and without build isolation, into a session folder put first on the
  blocks' ``PYTHONPATH``, as tests/benchmarks/test_plugin.py does; ``toy/`` and ``outputs/``
  are that test's two-sample toybench folder and two models' outputs.
- README's "Model editing" block: 8 synthetic edits instead of 24 (one sequence of 8).
- docs/knowledge_edit.md: ``Slake1.0/`` and ``VQA-RAD/`` in the official layouts (the builders of
  tests/knowledge_edit/test_tasks.py) and a tiny LLaVA-1.5 (medibench.knowledge_edit.tiny_llava,
  taught the task set's locality probes) at ``$DOCS_WEIGHTS/llava-1.5-7b-hf``. The block runs as
  written (``--sequential 200`` on the 6 edits of these layouts is one sequence of all 6) but for
  a marked substitution: MEND's training takes 12 steps instead of mend@1's 120. The
  geometry block (2) and the sweep block (3), chains of their own, read block 1's ``tasks/``:
  the same task set, built here; the geometry block edits the first 2 requests, the sweep block
  runs 2 seeds on the first 2 (both marked). :func:`check` holds both to what the page says
  they write.
- docs/build.md runs as written (the demo sources ship with the data packages).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.docs.standins import ALL, weights

_DEMO_FILES = "demo_run/run.sqlite demo_run/results.csv demo_run/report/index.html"

SUBSTITUTIONS = {
    ("README.md", "make demo   #"): (
        "medibench demo --out demo_run --suite medibench-suite@1-mini "
        f"&& ls {_DEMO_FILES} >/dev/null   #",
        "the demo target's command, without the venv and install (`make demo` installs the "
        "package); on the 66-sample frozen suite instead of the 396-sample one (same code, less "
        "time); then the files the README says it writes",
    ),
    ("README.md", "make test   #"): ("", "the test suite this test is part of"),
    ("docs/knowledge_edit.md", "--out mend/   # MEND's hypernetwork (mend@1)"): (
        "--out mend/ --max-steps 12   # MEND's hypernetwork (mend@1)",
        "12 training steps instead of mend@1's 120 (same code, less time: the tiny LLaVA's "
        "6 edits)",
    ),
    ("docs/knowledge_edit.md", "--editor $editor --out runs/geometry"): (
        "--editor $editor --limit 2 --out runs/geometry",
        "the first 2 edits instead of all 6 (same code, less time: both edit runs and "
        "the analysis that makes their edits again)",
    ),
    ("docs/knowledge_edit.md", "--seeds 0,1,2 --out sweeps/lora"): (
        "--seeds 0,1 --limit 2 --out sweeps/lora",
        "2 seeds of the first 2 edits instead of 3 seeds of all 6 (same code, less time: "
        "8 runs instead of 12)",
    ),
    ("README.md", "edit tasks --synthetic 24 --out edit_tasks"): (
        "edit tasks --synthetic 8 --out edit_tasks",
        "8 synthetic edits instead of 24: the `--sequential 8` run is one sequence of all 8 "
        "(same code, less time: the tiny LLaVA's teaching and both edit runs)",
    ),
}

#: The tiny LLaVA's name under $DOCS_WEIGHTS (docs/knowledge_edit.md's /models/llava-1.5-7b-hf).
LLAVA = "llava-1.5-7b-hf"
#: The modules the tiny LLaVA is built with (its cache key, besides this module).
_LLAVA_SOURCES = (
    "medibench.knowledge_edit.tiny_llava",
    "medibench.knowledge_edit._build",
    "medibench.knowledge_edit._readers",
    "medibench.knowledge_edit._tasks",
    "tests.knowledge_edit.test_tasks",
)


@contextmanager
def standins(
    file: str, work: Path, env: dict[str, str], cache: Path, blocks: frozenset[int] = ALL
) -> Iterator[None]:
    if file == "docs/benchmarks.md":
        site = _toy_site(cache)
        env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
        _toy_folders(work)
    elif file == "docs/knowledge_edit.md":
        _vqa_layouts(work)
        weights.tiny(env, LLAVA, _tiny_llava, sources=_LLAVA_SOURCES)
        if 1 not in blocks:  # the geometry and sweep blocks read block 1's tasks/
            _vqa_taskset(work / "data", work / "tasks")
    yield


def check(file: str, blocks: frozenset[int], work: Path) -> None:
    """docs/knowledge_edit.md: the geometry block analysed lora and grace@paper (the memory of
    grace@paper alone) into the folder it names, with the figures the page shows, and the
    report has its section; the sweep block wrote a 2x2 table over 2 seeds and a heat map per
    metric."""
    if file != "docs/knowledge_edit.md":
        return
    if 2 in blocks:
        out = work / "runs" / "geometry" / "analysis"
        data = json.loads((out / "analysis.json").read_text("utf-8"))
        assert [e["editor"] for e in data["editors"]] == ["lora", "grace@paper"]
        assert [e["memory"] is not None for e in data["editors"]] == [False, True]
        for name in ("shift.png", "pca_lora.png", "pca_grace_paper.png"):
            assert (out / name).is_file(), name
        from medibench.knowledge_edit._report import geometry_panel
        from medibench.runs import RunStore

        with RunStore(work / "runs" / "geometry") as store:
            panel = geometry_panel(store, work / "runs" / "geometry")
        assert panel is not None and panel["title"] == "Model editing: latent-space geometry"
    if 3 in blocks:
        out = work / "sweeps" / "lora"
        rows = json.loads((out / "sweep.json").read_text("utf-8"))["rows"]
        assert [(r["lr"], r["max_steps"], r["seeds"]) for r in rows] == [
            (1e-4, 5, 2), (1e-4, 20, 2), (1e-3, 5, 2), (1e-3, 20, 2)]  # fmt: skip
        for metric in ("reliability", "generality", "locality"):
            assert (out / f"heatmap_{metric}.png").is_file(), metric


def _toy_site(cache: Path) -> Path:
    """A folder with ``toy-pkg`` (the page's example files) installed, once per version of the
    files and of the installing code (tests/_cache.py)."""
    from tests._cache import cached
    from tests.benchmarks.test_plugin import example_files

    files = json.dumps(example_files(), sort_keys=True)
    return cached("docs-toybench-site", _install_toy, sources=_TOY_SOURCES, salt=files)


_TOY_SOURCES = ("tests.benchmarks.test_plugin",)


def _install_toy(site: Path) -> None:
    from tests.benchmarks.test_plugin import _pip_install, _write_package, example_files

    with tempfile.TemporaryDirectory() as tmp:
        package = _write_package(Path(tmp) / "toy-pkg", example_files())
        _pip_install(package, site)


def _toy_folders(work: Path) -> None:
    """``work/toy`` (toy.csv, two samples) and ``work/outputs/{copy,noisy}``."""
    from tests.benchmarks.test_plugin import _toy_data

    data, preds, _ = _toy_data(work)
    assert (data, preds) == (work / "toy", work / "outputs")  # the names the doc uses


def _vqa_layouts(root: Path) -> None:
    """``root/Slake1.0`` and ``root/VQA-RAD`` as their downloads unpack."""
    from tests.knowledge_edit.test_tasks import _slake, _vqarad

    _slake(root)  # writes root/Slake1.0
    _vqarad(root / "VQA-RAD")


def _vqa_taskset(data: Path, out: Path) -> Any:
    """The task set ``medibench edit tasks --slake Slake1.0/ --vqarad "VQA-RAD/"`` builds, from
    the layouts written into ``data``, in ``out``."""
    from medibench.knowledge_edit import build_requests, read_slake, read_vqarad, write_taskset

    _vqa_layouts(data)
    images = out / "images"
    rows = read_slake(data / "Slake1.0", images)
    rows += read_vqarad(data / "VQA-RAD", images)
    return write_taskset(out, build_requests(rows), sources=["slake", "vqa-rad"], seed=0)


def _tiny_llava(folder: Path) -> None:
    """A tiny LLaVA whose vocabulary covers the SLAKE / VQA-RAD task set the doc builds,
    taught its locality probes (so locality is defined), saved into ``folder``."""
    from medibench.io import read_image
    from medibench.knowledge_edit._build import TEXT_TEMPLATES
    from medibench.knowledge_edit.tiny_llava import (
        build_tiny_llava,
        taught_items,
        teach,
        vocabulary,
    )

    with tempfile.TemporaryDirectory() as tmp:
        ts = _vqa_taskset(Path(tmp) / "data", Path(tmp) / "tasks")
        texts = [t for r in ts.requests for p in r.probes for t in (p.question, p.answer)]
        folder.mkdir(parents=True)
        build_tiny_llava(folder, vocabulary([*texts, *TEXT_TEMPLATES]))
        teach(folder, taught_items(ts, read_image), epochs=15)
