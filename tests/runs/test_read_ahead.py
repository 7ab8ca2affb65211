"""Scoring existing outputs with a reader thread: each file decoded once, in order, and the
records (values, errors and their text) those of scoring without it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from medibench.datasets import PredictionIndex, SampleImages
from medibench.io import read_image, write_image
from medibench.runs import score_predictions
from medibench.runs._work import score_one
from medibench.samples import Prediction, Sample


@dataclass
class _Set:
    root: Path
    samples: list[Sample]
    name: str = "set"

    def __iter__(self):
        return iter(self.samples)


@dataclass
class CountingProtocol:
    """A plug-in protocol that counts its reads (and the threads doing them)."""

    name: str = "counting"
    version: str = "1"
    metric_names: tuple[str, ...] = ("mean_diff",)
    judged_metrics: tuple[str, ...] = ()
    reads: list[str] = field(default_factory=list)
    threads: set[str] = field(default_factory=set)

    def load_images(self, sample: Sample) -> SampleImages:
        self.reads.append(f"sample {sample.sample_id}")
        self.threads.add(threading.current_thread().name)
        if sample.sample_id == "s3":
            raise ValueError("s3's input is unreadable")
        return SampleImages(input=read_image(sample.input, mode="rgb"), target=None, mask=None)

    def read_prediction(self, path) -> np.ndarray:
        self.reads.append(Path(path).name)
        return read_image(path, mode="rgb")

    def applicable_metrics(self, sample: Sample) -> tuple[str, ...]:
        return self.metric_names

    def score(self, sample, images, prediction):
        from medibench.protocols import ProtocolResult

        res = ProtocolResult()
        res.metrics["mean_diff"] = float(np.abs(prediction.astype(int) - images.input).mean())
        return res


def build_folder(
    root: Path, n: int, *, unreadable: tuple[int, int], without: int | None = None, seed: int = 0
) -> tuple[_Set, PredictionIndex]:
    """``n`` samples of random 8x9 inputs with two random outputs each (model "m"): the output
    ``unreadable`` = (sample, k) is not a PNG, sample ``without`` has none."""
    rng = np.random.default_rng(seed)
    samples, index = [], PredictionIndex()
    for i in range(n):
        inp = root / f"s{i}_in.png"
        write_image(inp, rng.integers(0, 256, (8, 9, 3), dtype=np.uint8))
        samples.append(
            Sample(
                sample_id=f"s{i}",
                benchmark="set",
                input=str(inp),
                instruction="Edit.",
                perspective="modification",
            )
        )
        if i == without:
            continue
        for k in range(2):
            out = root / f"s{i}_{k}.png"
            if (i, k) == unreadable:
                out.write_bytes(b"not a png")
            else:
                write_image(out, rng.integers(0, 256, (8, 9, 3), dtype=np.uint8))
            index.add("m", f"s{i}", k, out)
    return _Set(root, samples), index


@pytest.fixture
def folder(tmp_path):
    return build_folder(tmp_path, 7, unreadable=(5, 1))


def test_each_file_is_read_once_in_order_by_the_reader(folder):
    ds, index = folder
    proto = CountingProtocol()
    records = score_predictions(ds, index, [proto], k=2, progress=False)
    expected = []
    for i in range(7):
        expected += [f"sample s{i}", f"s{i}_0.png", f"s{i}_1.png"]
    assert proto.reads == expected
    assert all(name.startswith("medibench-decode") for name in proto.threads)
    assert len(records) == 14


def test_records_equal_scoring_without_the_reader(folder):
    ds, index = folder
    records = score_predictions(ds, index, [CountingProtocol()], k=2, progress=False)
    plain = []
    for sample in ds:
        for k in range(2):
            path = index.files["m"][sample.sample_id][k]
            pred = Prediction(sample_id=sample.sample_id, model="m", k=k, path=str(path))
            plain.append(score_one(ds.root, sample, pred, CountingProtocol(), None, {}))
    assert records == plain
    by_key = {(r.sample_id, r.k): r for r in records}
    assert by_key["s3", 0].status == "error" and "s3's input is unreadable" in by_key["s3", 0].error
    assert by_key["s5", 1].status == "error", by_key["s5", 1]
    assert by_key["s5", 0].status == "ok", by_key["s5", 0].error
    assert by_key["s0", 0].metrics["mean_diff"] > 0


class _Batched:
    """A model with ``edit_batch`` that records which thread wrote each output."""

    name = "batched"
    batch_size = 2

    def edit(self, image, instruction, *, seed):
        return self.edit_batch([image], [instruction], seeds=[seed])[0]

    def edit_batch(self, images, instructions, *, seeds):
        return [np.full_like(im, s % 256) for im, s in zip(images, seeds, strict=True)]


def test_batches_are_written_by_a_writer_thread_in_task_order(folder, monkeypatch, tmp_path):
    from medibench.runs import _executors
    from medibench.runs._executors import LocalExecutor
    from medibench.runs._work import Task

    ds, _ = folder
    writers: list[str] = []
    real_write = _executors.write_image

    def spy(path, image):
        writers.append(threading.current_thread().name)
        return real_write(path, image)

    monkeypatch.setattr(_executors, "write_image", spy)
    tasks = [Task(sample=s, k=0, seed=i) for i, s in enumerate(ds.samples)]
    outcomes = list(LocalExecutor().generate(_Batched(), tasks, tmp_path / "out"))
    assert [o.task for o in outcomes] == tasks
    assert all(o.error is None for o in outcomes)
    assert len(writers) == 7 and all(w.startswith("medibench-write") for w in writers)
    assert read_image(outcomes[3].path, mode="rgb").max() == 3
