"""A run holds a bounded number of live samples and predictions, whatever the dataset's size
(issue 41: 100,000 samples in bounded memory; ``bench/scale.py`` measures the memory itself).

A probe counts the live ``Sample`` and ``Prediction`` records (the garbage collector's view) as
each item is read for the model and as each prediction is scored: before the stages streamed,
the plan, the generate tasks and the scoring queue held one of each per sample.
"""

from __future__ import annotations

import gc

from rich.console import Console

from medibench.datasets import load_dataset
from medibench.runs import RunConfig, RunStore, _executors, plan_run, run
from medibench.samples import Prediction, Sample
from tests.runs.conftest import make_native

N = 24


def _live(kind: type) -> int:
    return sum(type(o) is kind for o in gc.get_objects())


def test_a_loaded_dataset_holds_no_live_sample(tmp_path):
    data = make_native(tmp_path / "data", n=N, size=16)
    gc.collect()
    before = _live(Sample)  # other tests' records may still be alive
    ds = load_dataset(f"native:{data}")
    gc.collect()
    assert _live(Sample) == before
    assert [s.sample_id for s in ds[:3]] == ["s000", "s001", "s002"]
    assert ds.get("s007").sample_id == "s007" and ds[7].input.endswith("img/s007.png")
    assert [s.sample_id for s in ds[1::9]] == ["s001", "s010", "s019"]  # a shard's share


def test_a_run_holds_a_bounded_number_of_samples_and_predictions(tmp_path, monkeypatch):
    data = make_native(tmp_path / "data", n=N, size=16)
    seen: dict[str, list[tuple[int, int]]] = {"generate": [], "score": []}
    read_input, score_one = _executors.read_input, _executors.score_one

    gc.collect()
    before = (_live(Sample), _live(Prediction))  # other tests' records may still be alive

    def probe(stage: str, i: int) -> None:
        if i % 6 == 3:  # a few looks are enough: a held list would hold them all throughout
            seen[stage].append((_live(Sample) - before[0], _live(Prediction) - before[1]))

    def reading(task):
        probe("generate", _count(reading))
        return read_input(task)

    def scoring(*args, **kwargs):
        probe("score", _count(scoring))
        return score_one(*args, **kwargs)

    monkeypatch.setattr(_executors, "read_input", reading)
    monkeypatch.setattr(_executors, "score_one", scoring)
    plan = plan_run(RunConfig(dataset=f"native:{data}", models=("identity",), out=tmp_path / "r"))
    with run(plan, progress=False, console=Console(quiet=True)) as store:
        assert len(store.prediction_keys("identity")) == N
        assert len(store.score_keys("native", "1", status="ok")) == N
    assert len(seen["generate"]) == 4 and len(seen["score"]) == 4
    # At most the item in flight, the one the writer thread finishes and the executor's last.
    assert max(s for s, _ in seen["generate"] + seen["score"]) <= 4
    assert max(p for _, p in seen["generate"] + seen["score"]) <= 4
    with RunStore.open_existing(tmp_path / "r") as store:
        assert sorted(store.sample_map()) == [f"s{i:03d}" for i in range(N)]
        assert store.sample_map()["s005"] == load_dataset(f"native:{data}").get("s005")


def _count(fn) -> int:
    fn.calls = getattr(fn, "calls", -1) + 1
    return fn.calls
