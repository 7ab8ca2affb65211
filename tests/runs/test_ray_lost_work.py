"""The Ray executor's handling of work lost with a node (issue 41), without a cluster: model
actors that die are stood in for by fakes whose calls raise Ray's own ``WorkerCrashedError``.
A batch lost with its actor goes to the actors left; lost 3 times, or with every actor gone,
the stage stops with :class:`~medibench._ray.LostWorkError` (finished rows stored, never an
error row), and a plain re-run makes the rest: the store ends as an uninterrupted run's. The
real cluster is in ``test_ray_cluster.py``."""

from __future__ import annotations

import numpy as np
import pytest
import typer

from medibench.datasets import load_dataset
from medibench.io import encode_image
from medibench.runs import RunStore, generate
from tests.runs.conftest import make_native

ray_exceptions = pytest.importorskip("ray.exceptions")
from medibench._ray import LostWorkError  # noqa: E402
from medibench.runs import _ray  # noqa: E402


class Plus:
    """A model: the input plus the seed's last digit (so every output is its own)."""

    name = "plus"

    def edit(self, image, instruction, *, seed):
        return (image.astype(np.int64) + seed % 10).clip(0, 255).astype(np.uint8)


class _Ref:
    def __init__(self, value=None, lost=False):
        self.value, self.lost = value, lost


class _Actor:
    """A model actor that answers its calls, or (``dies_after`` calls) is lost with its node."""

    def __init__(self, model, dies_after=None):
        self.model, self.dies_after, self.calls = model, dies_after, 0
        self.run = self  # ``actor.run.remote(...)``

    def remote(self, chunk, images):
        self.calls += 1
        if self.dies_after is not None and self.calls > self.dies_after:
            return _Ref(lost=True)
        return _Ref([(encode_image(self.model.edit(im, t.sample.instruction, seed=t.seed)),
                      None, 0.0) for t, im in zip(chunk, images, strict=True)])  # fmt: skip


class _FakeRay:
    """What the executor calls of ``ray``: ``wait`` (first come first served), ``get``, ``kill``."""

    def wait(self, refs, num_returns):
        return refs[:1], refs[1:]

    def get(self, ref):
        if ref.lost:
            raise ray_exceptions.WorkerCrashedError()
        return ref.value

    def kill(self, actor):
        pass


def _executor(monkeypatch, model, fates):
    monkeypatch.setattr(_ray, "import_ray", _FakeRay)
    executor = object.__new__(_ray.RayExecutor)
    executor._actors = [_Actor(model, dies_after=f) for f in fates]
    executor._model_key, executor._batch, executor.model_name = _ray._model_key(model), 1, "plus"
    return executor


def _generate(path, samples, model, executor):
    with RunStore(path) as store:
        generate(store, samples, model, model_name="plus", progress=False, executor=executor)


def _rows(path):
    with RunStore(path) as store:
        return sorted(
            (p.sample_id, p.k, p.seed, p.status, (store.run_dir / p.path).read_bytes())
            for p in store.predictions()
        )


@pytest.fixture
def samples(tmp_path):
    return list(load_dataset(f"native:{make_native(tmp_path / 'data', n=8, size=16)}"))


def test_a_lost_actors_batches_go_to_the_actors_left(samples, tmp_path, monkeypatch):
    model = Plus()
    _generate(tmp_path / "ref", samples, model, _executor(monkeypatch, model, [None]))
    executor = _executor(monkeypatch, model, [None, 1, None])  # the second dies on its 2nd call
    lost = executor._actors[1]
    _generate(tmp_path / "out", samples, model, executor)
    assert lost not in executor._actors and len(executor._actors) == 2
    assert len(_rows(tmp_path / "out")) == 8 and _rows(tmp_path / "out") == _rows(tmp_path / "ref")


def test_a_batch_lost_three_times_stops_the_stage_and_a_rerun_resumes(
    samples, tmp_path, monkeypatch
):
    model = Plus()
    _generate(tmp_path / "ref", samples, model, _executor(monkeypatch, model, [None]))
    # actors lost after 3, 2 and 0 calls, one never: s005 is handed from one dying actor to the
    # next (each takes it while alive) before the healthy one has room
    executor = _executor(monkeypatch, model, [3, 2, 0, None])
    with pytest.raises(LostWorkError) as info:
        _generate(tmp_path / "out", samples, model, executor)
    assert str(info.value).startswith(
        "item s005_0 was lost with its Ray worker 3 time(s), last: WorkerCrashedError"
    )
    assert str(info.value).endswith("finished work is kept: run the same command again to resume")
    stored = _rows(tmp_path / "out")
    assert {r[3] for r in stored} == {"ok"}  # lost work is never a stored error
    _generate(tmp_path / "out", samples, model, _executor(monkeypatch, model, [None]))
    assert _rows(tmp_path / "out") == _rows(tmp_path / "ref")


def test_every_actor_lost_stops_the_stage(samples, tmp_path, monkeypatch):
    model = Plus()
    executor = _executor(monkeypatch, model, [1, 1])
    with pytest.raises(LostWorkError, match="every Ray model worker was lost .*WorkerCrashedError"):
        _generate(tmp_path / "out", samples, model, executor)
    assert [r[0] for r in _rows(tmp_path / "out")] == ["s000", "s002"]


def test_the_cli_says_lost_work_in_one_line_and_exits_1(tmp_path, capsys):
    from medibench.runs._cli import run_folder_errors

    with pytest.raises(typer.Exit) as info, run_folder_errors(tmp_path / "run"):
        raise LostWorkError("build item p0_0 was lost with its Ray worker 3 time(s), last: X")
    said = capsys.readouterr().err
    assert info.value.exit_code == 1 and said.count("\n") == 1
    assert said.startswith("error: build item p0_0 was lost with its Ray worker 3 time(s)")
    assert said.rstrip().endswith(f"(in {tmp_path / 'run'})")


def test_a_rerun_makes_what_an_older_release_stored_as_lost_work(samples, tmp_path, monkeypatch):
    """Before issue 41 a lost actor's items were stored as ``error`` rows; a plain re-run asks
    for every failed item again, so those are made too."""
    from medibench.samples import Prediction

    model = Plus()
    _generate(tmp_path / "ref", samples, model, _executor(monkeypatch, model, [None]))
    with RunStore(tmp_path / "out") as store:
        for s in samples[:3]:
            store.put_prediction(Prediction(sample_id=s.sample_id, model="plus", k=0, seed=0,
                                            status="error", error="ActorDiedError: The actor "
                                            "died because its node has died."))  # fmt: skip
    _generate(tmp_path / "out", samples, model, _executor(monkeypatch, model, [None]))
    assert _rows(tmp_path / "out") == _rows(tmp_path / "ref")
