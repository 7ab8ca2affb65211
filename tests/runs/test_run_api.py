"""The typed run API: RunConfig, run() (the orchestration the CLI uses), the protocol hooks'
defaults, and runs/ without an import circle."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from rich.console import Console

from medibench.datasets import load_dataset
from medibench.protocols import Aggregation, ProtocolResult, with_defaults
from medibench.runs import RunConfig, RunError, RunFolderInUse, plan_run, run, score_one
from medibench.samples import Prediction
from tests.runs.conftest import make_native
from tests.runs.test_lock import _hold

QUIET = Console(stderr=True, quiet=True)


def test_run_generates_scores_resumes_and_returns_the_open_store(tmp_path):
    data = make_native(tmp_path / "data", n=3)
    config = RunConfig(dataset=f"native:{data}", models=["identity"], out=tmp_path / "run", k=2)
    assert config.models == ("identity",) and config.protocols == ()
    with run(config, progress=False, console=QUIET) as store:
        scores = store.scores()
        assert len(store.predictions()) == 6
        assert {(s.protocol, s.protocol_version, s.status) for s in scores} == {
            ("native", "1", "ok")
        }
        assert len(scores) == 6
        assert store.get_meta("config")["protocols"] == {"native": "1"}
    with run(config, progress=False, console=QUIET) as again:  # resumes: the same records
        assert again.scores() == scores and len(again.predictions()) == 6


def test_plan_resolves_the_shard_folder_and_the_default_protocols(tmp_path):
    data = make_native(tmp_path / "data", n=4)
    config = RunConfig(
        dataset=f"native:{data}", models="identity", out=tmp_path / "run-{shard}", shard="1/2"
    )
    plan = plan_run(config)
    assert plan.folder == tmp_path / "run-1-of-2"
    assert [s.sample_id for s in plan.samples] == ["s001", "s003"]
    assert plan.protocols == ("native@1",)


def test_bad_specs_are_run_errors_and_bad_fields_value_errors(tmp_path):
    data = make_native(tmp_path / "data", n=2)
    with pytest.raises(RunError, match="no-such-model"):
        run(
            RunConfig(dataset=f"native:{data}", models=["no-such-model"], out=tmp_path / "r"),
            progress=False,
            console=QUIET,
        )
    with pytest.raises(ValueError, match="stage must be generate, score or all"):
        RunConfig(dataset=f"native:{data}", models=["identity"], out=tmp_path, stage="both")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "samples.jsonl").write_text("")
    with pytest.raises(RunError, match="has no samples"):
        plan_run(RunConfig(dataset=f"native:{tmp_path / 'empty'}", models=["identity"], out="x"))


def test_run_takes_the_folder_lock(tmp_path):
    data = make_native(tmp_path / "data", n=2)
    folder = tmp_path / "run"
    holder = _hold(folder)
    try:
        with pytest.raises(RunFolderInUse):
            run(RunConfig(dataset=f"native:{data}", models=["identity"], out=folder))
    finally:
        holder.kill()
        holder.wait()
    assert not (folder / "run.sqlite").exists()


@dataclass(frozen=True)
class _PlugInProtocol:
    """A third-party protocol: attributes and ``score`` only, no hooks."""

    name: str = "plug"
    version: str = "1"
    description: str = "mean intensity"
    metric_names: tuple[str, ...] = ("mean", "judged")
    judged_metrics: tuple[str, ...] = ("judged",)
    aggregation: Aggregation = Aggregation()

    def score(self, sample, images, prediction):
        res = ProtocolResult.for_images(images)
        res.metrics["mean"] = float(np.mean(prediction))
        return res


def test_a_protocol_without_hooks_gets_the_defaults_and_scores(tmp_path):
    data = make_native(tmp_path / "data", n=1)
    sample = next(iter(load_dataset(f"native:{data}")))
    proto = with_defaults(_PlugInProtocol())
    assert proto.name == "plug" and proto.applicable_metrics(sample) is None
    assert proto.read_prediction(data / sample.input).shape == (32, 32, 3)
    pred = Prediction(sample_id=sample.sample_id, model="m", k=0, path=sample.input, seed=0)
    rec = score_one(data, sample, pred, _PlugInProtocol())
    assert rec.status == "ok" and rec.metrics["judged"] is None
    assert rec.metrics["mean"] == pytest.approx(float(np.mean(proto.load_images(sample).input)))


@pytest.mark.parametrize("module", ["_work", "_executors", "_ray", "_runner", "_run", "_config"])
def test_every_runs_module_imports_first_without_a_circle(module):
    code = f"import medibench.runs.{module} as m; assert not hasattr(m, '__getattr__')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
