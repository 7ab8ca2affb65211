"""docs/analysis.md's statistics across models (blocks 3 and 4): what the user brings, and a
check of the printed statistics against scipy.

- Block 3 (MieDB-100k's evaluator against the clinicians): ``MieDB-100k-data/
  dataBenchmark_00.tar`` as ``medibench download miedb`` leaves it (the tar the fake Hub of
  tests/docs/standins/hub.py serves, from the MieDB builder) and ``MieDB-100k/inference/
  eval_results/<MODEL>/``, the published outputs of six models: each the builder's outputs with
  noise of its own (so the fake judge of tests/docs/standins/apis.py, whose scores hash the
  images it sees, scores each model differently). The rubric judge is that fake server.
- Block 4 (PaintBench against TinyGrafixBench): ``benchmarks/PaintBench/`` and ``benchmarks/
  TinyGrafixBench/`` in generate_benchmark.py's layout and ``model_outputs/<MODEL>/<benchmark>/``
  of six models (:func:`build_paint_trees`): each problem recolours a rectangle; a model of
  quality ``q`` recolours the rectangle's first ``q`` of columns on one benchmark and ``q``
  moved a little on the other, so the two benchmarks' scores follow each other as the paper's.

:func:`check` reads back the per-model values (the run store's judged rubric; the score
records' macro mIoU) and holds the JSON the blocks wrote to scipy.stats.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from tests.docs.standins import ALL

FILE = "docs/analysis.md"
MIEDB_BLOCK, PAINT_BLOCK = 3, 4
#: The six models whose published MieDB outputs the block judges (names as ranks.csv has them).
MIEDB_MODELS = (
    "gpt-image-1",
    "nano-banana-pro",
    "omnigen2",
    "omnigen2-mie",
    "qwen-image-edit",
    "step1x-edit",
)
#: PaintBench model -> the share of each edit it gets right (its TinyGrafixBench share: +/-).
PAINT_MODELS = {
    "gemini-2.5-flash-image": 0.7,
    "gpt-image-1": 0.55,
    "flux-kontext": 0.4,
    "qwen-image-edit": 0.45,
    "step1x-edit": 0.2,
    "instruct-pix2pix": 0.1,
}
TOL = 1e-9


@contextmanager
def standins(
    file: str, work: Path, env: dict[str, str], cache: Path, blocks: frozenset[int] = ALL
) -> Iterator[None]:
    if file == FILE and MIEDB_BLOCK in blocks:
        build_miedb(work, cache)
    if file == FILE and PAINT_BLOCK in blocks:
        build_paint_trees(work)
    yield


def build_miedb(work: Path, cache: Path) -> None:
    """The downloaded tar and six models' published outputs (module docstring)."""
    from medibench.io import read_image, write_image
    from tests.docs.standins import hub

    built = hub.build(cache / "hub")
    (work / "MieDB-100k-data").mkdir()
    shutil.copy(
        built / "repos" / hub._repo_id("miedb") / "dataBenchmark_00.tar", work / "MieDB-100k-data"
    )
    source = built / "outputs" / "MieDB-100k" / "inference" / "eval_results" / "toy-editor"
    eval_results = work / "MieDB-100k" / "inference" / "eval_results"
    for i, model in enumerate(MIEDB_MODELS):
        rng = np.random.default_rng(100 + i)
        for path in sorted(source.glob("*.png")):
            try:
                image = read_image(path).astype(np.int16)
            except (OSError, ValueError):  # the builder's corrupt output: not published here
                continue
            noisy = np.clip(image + rng.integers(-3, 4, image.shape), 0, 255).astype(np.uint8)
            write_image(eval_results / model / path.name, noisy)


def build_paint_trees(work: Path) -> None:
    """``benchmarks/{PaintBench,TinyGrafixBench}`` and six models' outputs of both."""
    from skimage import data as skdata

    from tests.benchmarks.paintbench.conftest import _crop, _meta, _save

    images = [_crop(skdata.astronaut()), _crop(skdata.coffee()), _crop(skdata.chelsea())]
    trees = {
        "PaintBench": (("recolor", "color_change"), ("removal", "structural_manipulation")),
        "TinyGrafixBench": (("bar_chart", "bar_chart"), ("heatmap", "heatmap")),
    }
    for b, (bench, tasks) in enumerate(trees.items()):
        for t, (task, category) in enumerate(tasks):
            for pid, image in enumerate(images):
                colour = np.array([40 + 60 * t, 200 - 50 * pid, 30 + 90 * b], np.uint8)
                top, left, h, w = 8 + 4 * pid, 10 + 6 * t, 20, 32
                answer = image.copy()
                answer[top : top + h, left : left + w] = colour
                folder = work / "benchmarks" / bench / task
                _save(folder / f"{pid:03d}_input.png", image)
                _save(folder / f"{pid:03d}_answer.png", answer)
                meta = _meta(task, pid, category)
                (folder / f"{pid:03d}.json").write_text(json.dumps(meta, indent=2))
                for m, (model, share) in enumerate(PAINT_MODELS.items()):
                    moved = share + (0.08 if (m + b + pid) % 2 else -0.08) * b
                    cols = int(round(min(max(moved, 0.0), 1.0) * w))
                    out = image.copy()
                    out[top : top + h, left : left + cols] = colour
                    dest = work / "model_outputs" / model / bench / task
                    _save(dest / f"{pid:04d}_output.png", out)


def check(file: str, blocks: frozenset[int], work: Path) -> None:
    """Block 3: rho and its exact p against the per-model rubric means read back from the run
    store (scipy's spearmanr, and the permutation test over all 720 orders); block 4: R^2 and
    the slope's p against the score records' macro mIoU (scipy's linregress); both figures."""
    if file != FILE:
        return
    from scipy import stats

    if MIEDB_BLOCK in blocks:
        rubric = _rubric_means(work / "runs" / "miedb-rubric")
        ranks = dict(line.split(",") for line in (work / "ranks.csv").read_text().split()[1:])
        models = sorted(rubric)
        assert models == sorted(MIEDB_MODELS)
        x = np.array([rubric[m] for m in models])
        y = np.array([float(ranks[m]) for m in models])
        row = _statistic(work / "miedb-human.json", "spearman")
        ref = stats.spearmanr(x, y)
        exact = stats.permutation_test(
            (x,),
            lambda a: stats.spearmanr(a, y).statistic,
            permutation_type="pairings",
            n_resamples=np.inf,
        )
        assert row["n_models"] == 6 and row["pvalue_method"] == "exact"
        assert abs(row["statistic"] - ref.statistic) < TOL
        assert abs(row["pvalue"] - exact.pvalue) < TOL
        assert (work / "figures" / "miedb" / "rubric-vs-human.png").is_file()
    if PAINT_BLOCK in blocks:
        paint = _macro_miou(work, "PaintBench", "paintbench.jsonl")
        tiny = _macro_miou(work, "TinyGrafixBench", "tinygrafixbench.jsonl")
        models = sorted(PAINT_MODELS)
        x = np.array([paint[m] for m in models])
        y = np.array([tiny[m] for m in models])
        row = _statistic(work / "paintbench-tinygrafixbench.json", "pearson")
        fit = stats.linregress(x, y)
        assert row["n_models"] == 6
        assert abs(row["fit_r_squared"] - fit.rvalue**2) < TOL
        assert abs(row["fit_pvalue"] - fit.pvalue) < TOL
        assert abs(row["fit_slope"] - fit.slope) < TOL
        drawn = work / "figures" / "paintbench" / "paintbench-vs-tinygrafixbench.json"
        assert json.loads(drawn.read_text())["points"]["gpt-image-1"] == [
            paint["gpt-image-1"],
            tiny["gpt-image-1"],
        ]


def _statistic(path: Path, method: str) -> dict:
    rows = json.loads(path.read_text())["statistics"]
    return next(r for r in rows if r["method"] == method)


def _rubric_means(run: Path) -> dict[str, float]:
    """Each model's mean judged rubric score (0-100) over its modification samples, as the
    judge filled protocol ``miedb@1``'s records (the block's ``--protocol``)."""
    from medibench.runs import RunStore

    values: dict[str, list[float]] = {}
    with RunStore.open_existing(run) as store:
        for s in store.scores("miedb"):
            v = s.metrics.get("rubric")
            if v is not None and s.k == 0 and s.protocol_version == "1":
                values.setdefault(s.model or "", []).append(v)
    return {m: float(np.mean(v)) for m, v in values.items()}


def _macro_miou(work: Path, bench: str, records: str) -> dict[str, float]:
    """Per model, the mean over categories of the mean over tasks of the problems' IoU (the
    score records), as PaintBench's evaluator averages."""
    tasks = {}
    for meta in (work / "benchmarks" / bench).glob("*/*.json"):
        tasks[meta.parent.name] = json.loads(meta.read_text())["category"]
    per: dict[str, dict[str, dict[str, list[float]]]] = {}
    for line in (work / records).read_text().splitlines():
        rec = json.loads(line)
        task = rec["sample_id"].rsplit("-", 1)[0]
        cat = per.setdefault(rec["model"], {}).setdefault(tasks[task], {})
        cat.setdefault(task, []).append(rec["metrics"]["iou"])
    return {
        model: float(np.mean([np.mean([np.mean(v) for v in t.values()]) for t in cats.values()]))
        for model, cats in per.items()
    }
