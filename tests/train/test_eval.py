"""``--eval-every``: each evaluated checkpoint runs through ``medibench run`` into
``DIR/eval/step-N/``; ``medibench report DIR`` shows the learning curve beside them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("accelerate")

from medibench.cli import app  # noqa: E402
from medibench.runs import RunStore  # noqa: E402
from medibench.train._report import learning_curve  # noqa: E402
from tests.train.conftest import train_args  # noqa: E402

torch.set_num_threads(1)


def test_eval_every_runs_checkpoints_and_report_shows_the_curve(
    tiny_ip2p, triplets, held_out, tmp_path
):
    method = "full"
    out = tmp_path / "run"
    options = {"method": method, "max_steps": 4, "rank": 4, "eval_every": 2, "eval_limit": 1}
    args = train_args(triplets, tiny_ip2p, out, eval_dataset=f"native:{held_out}", **options)
    args += ["--eval-model-option", "steps=2", "--eval-model-option", "resolution=null"]
    result = CliRunner().invoke(app, list(map(str, args)))
    assert result.exit_code == 0, result.output
    assert f"evaluation -> {out / 'eval' / 'step-2'}" in " ".join(result.output.split())
    for step in (2, 4):
        with RunStore.open_existing(out / "eval" / f"step-{step}") as store:
            assert [s.sample_id for s in store.samples()] == ["e000"]  # --eval-limit 1
            (pred,) = store.predictions()
            assert pred.status == "ok"
            spec = store.get_meta("config")["models"][0]
            assert store.scores()
        assert spec == f"ip2p:{out}/checkpoint-{step}"
    curve = learning_curve(out)
    assert [s for s, _ in curve["loss"]] == [1, 2, 3, 4]
    assert sorted({e["step"] for e in curve["evals"]}) == [2, 4]
    assert all(e["n"] == 1 and e["metrics"] for e in curve["evals"])
    report = CliRunner().invoke(app, ["report", str(out)])
    assert report.exit_code == 0, report.output
    page = (out / "report" / "index.html").read_text()
    assert "Training: learning curve" in page and "evaluated checkpoints" in page and "<svg" in page
    metric = next(iter(curve["evals"][0]["metrics"]))
    assert f"<th>{metric}</th>" in page
    assert json.loads((out / "train_config.json").read_text())["eval_limit"] == 1
    # the panel provider shows the curve in the report of an evaluation run too
    report = CliRunner().invoke(app, ["report", str(out / "eval" / "step-4"), "--no-plots"])
    assert report.exit_code == 0, report.output
    assert "Training: learning curve" in (out / "eval/step-4/report/index.html").read_text()


def test_a_lora_checkpoint_is_evaluated_as_the_base_with_lora(tmp_path):
    from medibench.train import TrainConfig, checkpoint_model_spec

    cfg = TrainConfig(dataset="native:x", model="flux-kontext:/w/flux", method="lora", out=tmp_path)
    ckpt = tmp_path / "checkpoint-4"
    assert checkpoint_model_spec(cfg, ckpt) == ("flux-kontext:/w/flux", (f"lora={ckpt}",))
