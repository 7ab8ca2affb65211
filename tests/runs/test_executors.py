"""Executors: local (sequential, batched, threads, async) and Ray give the same run store."""

from __future__ import annotations

import asyncio
import errno
import time

import numpy as np
import pytest

from medibench.datasets import load_dataset, load_images
from medibench.io._write import DiskFullError
from medibench.models._spec import parse_model_spec
from medibench.protocols import load_protocol
from medibench.runs import RunStore, _executors, generate, score
from medibench.runs._executors import LocalExecutor
from tests._ray_lock import RAY_GROUP, only_ray_instance
from tests.runs.conftest import make_native


class SeededNoise:
    """Adds seed-dependent noise: outputs differ per (sample, k) and are reproducible."""

    name = "noise"

    def __init__(self, fail_on: str | None = None, batch_size: int = 1) -> None:
        self.fail_on = fail_on
        self.batch_size = batch_size
        self.batches: list[int] = []

    def edit(self, image, instruction, *, seed):
        if self.fail_on and self.fail_on in instruction:
            raise RuntimeError(f"cannot do {instruction!r}")
        noise = np.random.default_rng(seed).integers(0, 8, image.shape)
        return np.clip(image.astype(int) + noise, 0, 255).astype(np.uint8)

    def edit_batch(self, images, instructions, *, seeds):
        self.batches.append(len(images))
        return [
            self.edit(i, t, seed=s) for i, t, s in zip(images, instructions, seeds, strict=True)
        ]


class AsyncNoise(SeededNoise):
    concurrency = 4

    async def aedit(self, image, instruction, *, seed):
        return self.edit(image, instruction, seed=seed)


def _samples(root, n=6, fail=None):
    samples = list(load_dataset(f"native:{make_native(root, n=n)}"))
    if fail is not None:
        samples[fail] = samples[fail].model_copy(update={"instruction": "BAD instruction"})
    return samples


def _run(tmp_path, name, samples, model, executor=None, k=2):
    with RunStore(tmp_path / name) as store:
        rep = generate(
            store, samples, model, model_name="noise", k=k, progress=False, executor=executor
        )
        preds = {
            (p.sample_id, p.k): (
                p.status,
                p.seed,
                (store.run_dir / p.path).read_bytes() if p.path else p.error,
            )
            for p in store.predictions()
        }
    return rep, preds


@pytest.mark.parametrize(
    "model, executor",
    [
        (SeededNoise(fail_on="BAD", batch_size=3), LocalExecutor()),
        (SeededNoise(fail_on="BAD"), LocalExecutor(workers=3)),
        (AsyncNoise(fail_on="BAD"), LocalExecutor()),
        (AsyncNoise(fail_on="BAD"), LocalExecutor(workers=8)),
    ],
    ids=["batched", "threads", "async-default", "async-8"],
)
def test_every_local_executor_gives_the_sequential_result(tmp_path, model, executor):
    samples = _samples(tmp_path / "data", fail=1)
    ref_rep, reference = _run(tmp_path, "seq", samples, SeededNoise(fail_on="BAD"))
    rep, preds = _run(tmp_path, "other", samples, model, executor)
    assert preds == reference
    assert (rep.done, rep.failed) == (ref_rep.done, ref_rep.failed) == (10, 2)
    assert "RuntimeError: cannot do 'BAD instruction'" in preds[("s001", 0)][2]


def test_batches_group_same_size_items_and_a_failing_batch_fails_alone(tmp_path):
    samples = _samples(tmp_path / "data", n=4, fail=2)
    model = SeededNoise(fail_on="BAD", batch_size=3)
    rep, preds = _run(tmp_path, "run", samples, model, k=3)
    assert model.batches == [3, 3, 3, 3]  # k=3 draws of each sample, one call each
    assert (rep.done, rep.failed) == (9, 3)  # the bad sample's batch was retried item by item
    assert {preds[("s002", j)][0] for j in range(3)} == {"error"}


def test_batches_are_cut_from_size_buckets_across_the_stage(tmp_path):
    """Sizes that alternate in the dataset still give full batches: the stage is bucketed by
    the inputs' header sizes, and an unreadable input fails alone with its read error."""
    from medibench.io import write_image
    from medibench.runs._work import Task, batches

    samples = _samples(tmp_path / "data", n=7)
    for i in (1, 3, 5):  # 32x32 gray inputs with 40x24 ones between them
        path = tmp_path / "data" / f"wide{i}.png"
        write_image(path, np.full((24, 40), 9 * i, np.uint8))
        samples[i] = samples[i].model_copy(update={"input": str(path)})
    (tmp_path / "data" / "broken.png").write_bytes(b"not a png")
    samples[6] = samples[6].model_copy(update={"input": str(tmp_path / "data" / "broken.png")})
    tasks = [Task(s, 0, i) for i, s in enumerate(samples)]
    ids = [[t.sample.sample_id for t in b] for b in batches(tasks, 2)]
    assert ids == [["s000", "s002"], ["s004"], ["s001", "s003"], ["s005"], ["s006"]]
    assert [len(b) for b in batches(tasks, 1)] == [1] * 7
    model = SeededNoise(batch_size=2)
    rep, preds = _run(tmp_path, "run", samples, model, k=1)
    assert model.batches == [2, 2]  # in sample order the sizes alternate: no batch of 2
    assert (rep.done, rep.failed) == (6, 1)
    assert "broken.png" in preds[("s006", 0)][2]
    _, one_by_one = _run(tmp_path, "single", samples, SeededNoise(batch_size=1), k=1)
    assert preds == one_by_one  # batching changes no output


def test_outputs_of_another_size_or_mode_are_stored_as_made_and_scored(tmp_path):
    samples = _samples(tmp_path / "data", n=2)

    class Odd:
        name = "odd"

        def edit(self, image, instruction, *, seed):
            if instruction.endswith("!"):
                return np.zeros((4, 4), np.float32)  # not an image: recorded as a failure
            return np.repeat(np.repeat(image[:, :, 0], 2, axis=0), 2, axis=1)  # gray, 2x

    samples[1] = samples[1].model_copy(update={"instruction": "Remove it!"})
    with RunStore(tmp_path / "run") as store:
        rep = generate(store, samples, Odd(), model_name="odd", progress=False)
        assert (rep.done, rep.failed) == (1, 1)
        assert "float32" in rep.failures[0][1]
        from medibench.io import read_image

        ok = store.predictions(status="ok")[0]
        assert read_image(store.run_dir / ok.path).shape[:2] == (64, 64)  # native size kept
        score(store, samples, load_protocol("native@1"), load_images=load_images, progress=False)
        by_status = {s.sample_id: s for s in store.scores()}
    assert by_status["s000"].status == "ok" and by_status["s000"].notes  # resized, and said so
    assert by_status["s001"].status == "missing"


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    with only_ray_instance():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        yield ray


@RAY_GROUP
def test_ray_with_two_workers_gives_the_local_scores(tmp_path, local_ray):
    from medibench.runs._executors import RayExecutor

    samples = _samples(tmp_path / "data", n=6)
    proto = load_protocol("native@1")
    spec = parse_model_spec("classical")
    results = {}
    for name, executor in [("local", LocalExecutor()), ("ray", RayExecutor(workers=2))]:
        t0 = time.perf_counter()
        with RunStore(tmp_path / name) as store:
            model = spec if name == "ray" else spec.load()
            model_name = executor.start(spec) if name == "ray" else model.name
            generate(
                store, samples, model, model_name=model_name, k=2, progress=False, executor=executor
            )
            score(store, samples, proto, load_images=load_images, progress=False, executor=executor)
            results[name] = (
                sorted((s.model, s.sample_id, s.k, s.status, s.metrics) for s in store.scores()),
                sorted((p.sample_id, p.k, p.seed) for p in store.predictions(status="ok")),
            )
        executor.close()
        results[name + "_s"] = time.perf_counter() - t0
    assert len(results["ray"][0]) == 12 and results["ray"] == results["local"]


def test_async_edits_go_on_while_their_outputs_are_written(tmp_path, monkeypatch):
    samples = _samples(tmp_path / "data", n=6)
    _, reference = _run(tmp_path, "seq", samples, SeededNoise())
    real, writing, seen = _executors._write_outcome, [0], []

    def slow_write(*args):
        writing[0] += 1
        time.sleep(0.1)  # a slow disk: a PNG write takes five edits' time
        try:
            return real(*args)
        finally:
            writing[0] -= 1

    class Watching(AsyncNoise):
        async def aedit(self, image, instruction, *, seed):
            seen.append(writing[0])  # writes in progress as this edit starts
            await asyncio.sleep(0.02)
            return self.edit(image, instruction, seed=seed)

    monkeypatch.setattr(_executors, "_write_outcome", slow_write)
    rep, preds = _run(tmp_path, "slow", samples, Watching(), LocalExecutor(workers=2))
    assert preds == reference and rep.done == 12
    # Both workers' outputs were being written while an edit started: a worker that waited for
    # its own write could not have been editing then.
    assert max(seen) == 2


def test_a_full_disk_while_writing_async_outputs_stops_the_stage(tmp_path, monkeypatch):
    real, count = _executors.write_image, []

    def full_after_two(path, image):
        count.append(path)
        if len(count) > 2:
            raise DiskFullError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, image)

    monkeypatch.setattr(_executors, "write_image", full_after_two)
    samples = _samples(tmp_path / "data", n=6)
    with pytest.raises(DiskFullError, match="no space left on the device"):
        _run(tmp_path, "full", samples, AsyncNoise(), LocalExecutor(workers=2))
    with RunStore(tmp_path / "full") as store:
        assert len(store.predictions()) == 2  # the two written outputs are stored
