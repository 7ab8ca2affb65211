"""Training and prompt tuning: the tiny InstructPix2Pix and Stable Diffusion inpainting
pipelines of the tests at the names the blocks give (``/weights/instruct-pix2pix``,
``/weights/sd-inpainting``), the README's training cut to two steps, and for docs/train.md's
MedEBench recipe the 5-sample MedEBench of the benchmark tests at ``MedEBench/``; :func:`check`
holds docs/train.md's runs to what the page says they make (training logs, evaluations at the
checkpoints, reports, checkpoints, the held-out comparison). The prompt-tuning
blocks need nothing: their example builds its own tiny CLIP, offline, and runs as written."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.docs.standins import ALL, weights

_SIZE = "a training of 2 steps and one evaluation of 1 sample at 2 denoising steps"

SUBSTITUTIONS = {
    ("README.md", "--bins 128,256,512 --max-steps 2000"): (
        "--bins 128,256,512 --max-steps 2",
        f"2 steps instead of 2,000 ({_SIZE}; same code, less time)",
    ),
    ("README.md", "--eval-every 500 --eval-limit 50"): (
        "--eval-every 2 --eval-limit 1 --eval-model-option steps=2",
        f"an evaluation at step 2 on 1 sample at 2 denoising steps ({_SIZE})",
    ),
}

#: file -> the tiny pipelines its blocks name under /weights/
_NEEDS = {
    "README.md": ("instruct-pix2pix",),
    "docs/train.md": ("instruct-pix2pix", "sd-inpainting"),
}


@contextmanager
def standins(
    file: str, work: Path, env: dict[str, str], cache: Path, blocks: frozenset[int] = ALL
) -> Iterator[None]:
    needs = _NEEDS.get(file, ())
    if not needs or (file == "README.md" and 10 not in blocks):  # the README's training block
        yield
        return
    if file == "docs/train.md" and 2 in blocks:  # MedEBench's GitHub tree, as cloned
        from tests.benchmarks.medebench.conftest import build_medebench

        build_medebench(work / "MedEBench")
    # the weights folder itself (idempotent; it may not be entered yet: modules go by name)
    with weights.standins(file, work, env, cache):
        for name in needs:
            weights.tiny(env, name, _builder(name))
        yield


def _builder(name: str):
    """The tests' builder of ``name`` (imported here: torch loads only for these files)."""
    if name == "instruct-pix2pix":
        from tests.models.test_diffusers import build_tiny_ip2p

        return build_tiny_ip2p
    from tests.build.test_diffusers_inpaint import build_tiny_sd_inpaint

    return build_tiny_sd_inpaint


def check(file: str, blocks: frozenset[int], work: Path) -> None:
    """docs/train.md: the MieDB ablation (block 1) trained 2 steps and evaluated its 3 held-out
    samples at step 2 for each split, and printed its table (:func:`ablation_table`); the
    MedEBench comparison (block 2) trained on the train part only, ran and judged both models
    on the held-out part (disjoint from it), and compared them in one table with the paper's
    EA, CP and VQ; the inpainting expert (block 3) saved its LoRA at step 2."""
    if file != "docs/train.md":
        return
    from medibench.runs import RunStore

    runs = work / "runs"
    if 1 in blocks:
        for run in ("perception", "modification", "transformation"):
            log = (runs / f"miedb-{run}-only" / "train.jsonl").read_text().splitlines()
            assert len(log) == 2, run
            with RunStore.open_existing(runs / f"miedb-{run}-only" / "eval" / "step-2") as store:
                assert len(store.samples()) == 3 and store.scores(), run
        assert (runs / "miedb-all" / "report" / "index.html").is_file()
        ablation_table(runs)
    if 2 in blocks:
        _check_medebench(work)
    if 3 in blocks:
        assert (
            runs / "lesion-expert" / "checkpoint-2" / "pytorch_lora_weights.safetensors"
        ).is_file()


#: docs/train.md block 1's ablation variants: training folder -> its label in the table.
ABLATION = {
    "miedb-perception-only": "P-only",
    "miedb-modification-only": "M-only",
    "miedb-transformation-only": "T-only",
    "miedb-all": "all",
}


def ablation_table(runs: Path) -> None:
    """``runs/ablation.csv`` (``medibench compare`` of the four trainings): a row per variant,
    read from its evaluation at step 2, each metric the mean of that evaluation's score records
    that have it (one output per sample), its checkpoint the column that differs."""
    import csv

    import numpy as np

    from medibench.runs import RunStore

    with open(runs / "ablation.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["label"] for r in rows] == list(ABLATION.values())
    for row, folder in zip(rows, ABLATION, strict=True):
        evaluation = runs / folder / "eval" / "step-2"
        assert Path(row["run"]) == Path("runs") / folder / "eval" / "step-2"
        assert row["lora"] == f"runs/{folder}/checkpoint-2" and row["n"] == "3"
        with RunStore.open_existing(evaluation) as store:
            scores = store.scores()
        metrics = [c for c in rows[0] if c not in {"label", "run", "model", "spec", "lora", "n"}]
        assert {"dice", "psnr", "ssim"} <= set(metrics)
        for metric in metrics:
            values = [s.metrics[metric] for s in scores if s.metrics.get(metric) is not None]
            assert abs(float(row[metric]) - np.mean(values)) < 1e-9, (folder, metric)


def _check_medebench(work: Path) -> None:
    """The MedEBench recipe: 4 of the 5 samples trained on, the 5th (default_rng(0) deals
    ids 3, 5, 4, 1 to train) run, scored and judged by both models, and one comparison."""
    import csv
    import json

    from medibench.datasets import load_dataset
    from medibench.runs import RunStore

    split = work / "data" / "medebench-split"
    assert json.loads((split / "provenance.json").read_text())["splits"] == {"test": 1, "train": 4}
    config = json.loads((work / "runs" / "medebench-ft" / "train_config.json").read_text())
    assert config["dataset_options"] == {"split": "train"}
    assert load_dataset(f"native:{split}", split="test").sample_ids() == ["2"]
    for run in ("medebench-base", "medebench-finetuned"):
        with RunStore.open_existing(work / "runs" / run) as store:
            assert [s.sample_id for s in store.samples()] == ["2"], run
            predictions = store.predictions()
            assert predictions and all(p.status == "ok" for p in predictions), run
            metrics = {m for s in store.scores("medebench") for m, v in s.metrics.items()
                       if v is not None}  # fmt: skip
            assert {"ea", "cp", "vq"} <= metrics, (run, metrics)
    with open(work / "medebench-finetuning.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["label"] for r in rows] == ["base", "finetuned"], rows
    assert {"ea", "cp", "vq"} <= set(rows[0]), rows[0]
