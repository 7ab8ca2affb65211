"""Scoring existing outputs in several processes: the records those of one process, each file
decoded once over all processes, workers forked where that is safe and spawned elsewhere."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import pytest

from medibench.datasets import SampleImages
from medibench.io import read_image
from medibench.runs import _folder, score_predictions
from medibench.samples import Sample
from tests.runs.test_read_ahead import build_folder


@dataclass(frozen=True)
class LoggingProtocol:
    """A plug-in protocol that appends every read to ``log`` as ``pid file`` (one line each)."""

    log: str
    name: str = "logging"
    version: str = "1"
    metric_names: tuple[str, ...] = ("mean_diff", "max_diff")
    judged_metrics: tuple[str, ...] = ()

    def _note(self, what: str) -> None:
        with open(self.log, "a") as f:
            f.write(f"{os.getpid()} {what}\n")

    def load_images(self, sample: Sample) -> SampleImages:
        self._note(Path(sample.input).name)
        if sample.sample_id == "s7":
            raise ValueError("s7's input is unreadable")
        return SampleImages(input=read_image(sample.input, mode="rgb"), target=None, mask=None)

    def read_prediction(self, path) -> np.ndarray:
        self._note(Path(path).name)
        return read_image(path, mode="rgb")

    def applicable_metrics(self, sample: Sample) -> tuple[str, ...]:
        return self.metric_names

    def score(self, sample, images, prediction):
        from medibench.protocols import ProtocolResult

        res = ProtocolResult()
        diff = np.abs(prediction.astype(int) - images.input)
        res.metrics["mean_diff"] = float(diff.mean())
        res.metrics["max_diff"] = float(diff.max())
        return res


N = 30


@pytest.fixture
def folder(tmp_path):
    """30 samples, two outputs each; s0 has none, s9's second is not a PNG, s7's input fails."""
    return build_folder(tmp_path, N, unreadable=(9, 1), without=0, seed=1)


def _reads(log: Path) -> list[tuple[int, str]]:
    return [
        (int(pid), name)
        for pid, name in (line.split() for line in log.read_text().split("\n") if line)
    ]


def test_two_workers_give_the_records_of_one_and_read_each_file_once(folder, tmp_path):
    ds, index = folder
    one_log, two_log = tmp_path / "one.log", tmp_path / "two.log"
    protos_one = [LoggingProtocol(str(one_log)), LoggingProtocol(str(one_log), name="second")]
    protos_two = [LoggingProtocol(str(two_log)), LoggingProtocol(str(two_log), name="second")]
    one = score_predictions(ds, index, protos_one, k=2, progress=False)
    two = score_predictions(ds, index, protos_two, k=2, workers=2, progress=False)
    assert two == one
    assert [r.protocol for r in two] == ["logging"] * 2 * N + ["second"] * 2 * N
    assert [(r.sample_id, r.k) for r in two[: 2 * N]] == [
        (f"s{i}", k) for i in range(N) for k in range(2)
    ]
    by_key = {(r.sample_id, r.k): r for r in two if r.protocol == "logging"}
    assert by_key["s0", 0].status == "missing" and by_key["s0", 1].status == "missing"
    assert by_key["s7", 0].status == "error" and "s7's input is unreadable" in by_key["s7", 0].error
    assert by_key["s9", 1].status == "error" and by_key["s9", 0].status == "ok"
    assert by_key["s3", 1].metrics["max_diff"] > 0

    reads = _reads(two_log)
    # Each file once per protocol, over every process: 30 inputs and 57 outputs read, twice.
    names = sorted(name for _, name in reads)
    assert names == sorted(name for _, name in _reads(one_log))
    assert len(names) == 2 * (N + 2 * (N - 1)) and len(set(names)) == N + 2 * (N - 1)
    # Forked workers: this process scored s0 and s1 (up to the first sample with an output,
    # loading what the protocols load lazily once), two others the rest. Spawned ones (another
    # thread alive in this test process, Ray's after its tests, say): the two workers all.
    by_pid: dict[int, set[str]] = {}
    for pid, name in reads:
        by_pid.setdefault(pid, set()).add(name.split("_")[0])
    forked = _folder._fork_is_safe()
    assert by_pid.pop(os.getpid(), set()) == ({"s0", "s1"} if forked else set())
    # At most the two workers; spans go to whichever is free, so on a loaded machine one worker
    # can take every span before the other has started (seen in CI under load).
    assert 1 <= len(by_pid) <= 2
    assert set.union(*by_pid.values()) == {f"s{i}" for i in range(2 if forked else 0, N)}


def test_spawned_workers_when_another_thread_runs(folder, tmp_path):
    """Forking copies only the calling thread: with another thread alive the workers are
    spawned (the job sent once to each), and the records are the same."""
    ds, index = folder
    log = tmp_path / "reads.log"
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        assert not _folder._fork_is_safe()
        two = score_predictions(
            ds, index, [LoggingProtocol(str(log))], k=2, workers=2, progress=False
        )
    finally:
        stop.set()
        other.join()
    one = score_predictions(
        ds, index, [LoggingProtocol(str(tmp_path / "one.log"))], k=2, progress=False
    )
    assert two == one
    # Every file read in the workers (how many of the two got a span depends on timing).
    pids = {pid for pid, _ in _reads(log)}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert len(_reads(log)) == N + 2 * (N - 1)


def test_opencv_threads_are_restored_after_forking(folder, tmp_path):
    ds, index = folder
    before = cv2.getNumThreads()
    cv2.setNumThreads(2)
    try:
        score_predictions(
            ds, index, [LoggingProtocol(str(tmp_path / "r.log"))], workers=2, progress=False
        )
        assert cv2.getNumThreads() == 2
    finally:
        cv2.setNumThreads(before)


def test_spans_cover_the_samples_and_shrink_towards_the_end():
    """A third of each worker's share of what is left, at most 64 and at least 2 samples."""
    spans = _folder._spans(1, 200, 2)
    assert spans[0][0] == 1 and spans[-1][1] == 200
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    sizes = [hi - lo for lo, hi in spans]
    assert sizes == [34, 28, 23, 19, 16, 14, 11, 9, 8, 7, 5, 5, 4, 3, 3, 2, 2, 2, 2, 2]
    assert _folder._spans(0, 7, 4) == [(0, 2), (2, 4), (4, 6), (6, 7)]
    big = [hi - lo for lo, hi in _folder._spans(0, 3400, 2)]
    assert big[:48] == [64] * 48 and big[48] == 55 and sum(big) == 3400
    assert _folder._spans(5, 5, 2) == []


def test_workers_tune_the_allocator_unless_the_environment_says_how(folder, tmp_path, monkeypatch):
    if not _folder._fork_is_safe():
        pytest.skip(
            "another thread is alive in this process: workers are spawned, not forked, "
            "and do not inherit the spy (test_spawned_workers_when_another_thread_runs)"
        )
    ds, index = folder
    marks = tmp_path / "tuned"
    real = _folder._tune_malloc

    def spy() -> bool:
        applied = real()
        with open(marks, "a") as f:
            f.write(f"{os.getpid()} {applied}\n")
        return applied

    monkeypatch.setattr(_folder, "_tune_malloc", spy)  # forked workers inherit the spy
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_MAX_", raising=False)
    score_predictions(
        ds, index, [LoggingProtocol(str(tmp_path / "r.log"))], workers=2, progress=False
    )
    lines = marks.read_text().split()
    assert lines[1::2] == ["True", "True"] and str(os.getpid()) not in lines[::2]
    monkeypatch.setenv("MALLOC_MMAP_MAX_", "0")
    assert real() is False


@dataclass(frozen=True)
class DyingProtocol(LoggingProtocol):
    """Ends its process (as the kernel's out-of-memory killer would) on sample s20."""

    def score(self, sample, images, prediction):
        if sample.sample_id == "s20":
            os._exit(9)
        return super().score(sample, images, prediction)


def test_a_worker_that_dies_is_an_error_naming_samples(folder, tmp_path):
    ds, index = folder
    proto = DyingProtocol(str(tmp_path / "r.log"))
    with pytest.raises(
        RuntimeError, match=r"worker process ended abruptly .* samples s\d+\.\.s\d+"
    ):
        score_predictions(ds, index, [proto], workers=2, progress=False)


def test_progress_advances_once_per_sample_whatever_the_protocols(folder, tmp_path):
    ds, index = folder
    log = str(tmp_path / "r.log")
    job = _folder._Job(ds.root, ds.samples, index, (LoggingProtocol(log), LoggingProtocol(log)), 2)
    calls: list[int] = []
    records = _folder._score_span(job, 3, 10, lambda: calls.append(len(calls)))
    assert len(calls) == 7 and len(records) == 2 * 7 * 2
