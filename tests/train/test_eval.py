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

torch.set_num_threads(1)


def test_eval_every_runs_checkpoints_and_report_shows_the_curve(
    tiny_ip2p, evaluated_training, tmp_path
):
    out, output = evaluated_training  # 3 steps, evaluated at each, and the base model first
    assert f"evaluation -> {out / 'eval' / 'step-2'}" in " ".join(output.split())
    for step in (1, 2, 3):
        with RunStore.open_existing(out / "eval" / f"step-{step}") as store:
            assert [s.sample_id for s in store.samples()] == ["e000"]  # --eval-limit 1
            (pred,) = store.predictions()
            assert pred.status == "ok"
            spec = store.get_meta("config")["models"][0]
            assert store.scores()
        assert spec == f"ip2p:{out}/checkpoint-{step}"
    with RunStore.open_existing(out / "eval" / "step-0") as store:
        assert store.get_meta("config")["models"] == [f"ip2p:{tiny_ip2p}"]  # the base weights
        assert [s.sample_id for s in store.samples()] == ["e000"] and store.scores()
    curve = learning_curve(out)
    assert [s for s, _ in curve["loss"]] == [1, 2, 3]
    assert sorted({e["step"] for e in curve["evals"]}) == [0, 1, 2, 3]  # 0: the base model
    assert all(e["n"] == 1 and e["metrics"] for e in curve["evals"])
    report = CliRunner().invoke(app, ["report", str(out), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Training: learning curve" in page and "evaluated checkpoints" in page and "<svg" in page
    metric = next(iter(curve["evals"][0]["metrics"]))
    assert f"<th>{metric}</th>" in page
    assert 'data-kind="learning-curve"' in page and 'data-steps="0,1,2,3"' in page
    _check_the_drawn_curve(out, curve)
    assert json.loads((out / "train_config.json").read_text())["eval_limit"] == 1
    # the panel provider shows the curve in the report of an evaluation run too
    args = ["report", str(out / "eval" / "step-3"), "--no-plots", "--out", str(tmp_path / "r3")]
    report = CliRunner().invoke(app, args)
    assert report.exit_code == 0, report.output
    assert "Training: learning curve" in (tmp_path / "r3" / "index.html").read_text()


def test_a_lora_checkpoint_is_evaluated_as_the_base_with_lora(tmp_path):
    from medibench.train import TrainConfig, checkpoint_model_spec

    cfg = TrainConfig(dataset="native:x", model="flux-kontext:/w/flux", method="lora", out=tmp_path)
    ckpt = tmp_path / "checkpoint-4"
    assert checkpoint_model_spec(cfg, ckpt) == ("flux-kontext:/w/flux", (f"lora={ckpt}",))


def _check_the_drawn_curve(out, curve):
    """The figure's points: the raw loss, its EMA by hand, and the step-0 point of each metric
    equal to the base model's one evaluated sample; y axes from 0 (no negative value here)."""
    from medibench.train._report import EMA_BETA, training_panel

    (figure,) = training_panel(None, out)["figures"]
    drawn = json.loads(figure["data"]["drawn"])
    raw = [v for _, v in curve["loss"]]
    assert drawn["loss"] == [[float(s), v] for s, v in curve["loss"]]
    smooth = [raw[0]]
    for v in raw[1:]:
        smooth.append(EMA_BETA * smooth[-1] + (1 - EMA_BETA) * v)
    assert [y for _, y in drawn["ema"]] == pytest.approx(smooth, rel=1e-12)
    with RunStore.open_existing(out / "eval" / "step-0") as store:
        (score,) = [s for s in store.scores() if s.status == "ok"][:1]
    protocol = f"{score.protocol}@{score.protocol_version}"
    checked = 0
    for name, value in score.metrics.items():
        points = drawn["metrics"].get(f"{name} ({protocol})")
        if points is None or value is None:
            continue
        assert points[0] == [0.0, pytest.approx(value, rel=1e-9)]
        assert [x for x, _ in points] == [0.0, 1.0, 2.0, 3.0]
        checked += 1
    assert checked >= 1
    negative = {k for k, pts in drawn["metrics"].items() if min(y for _, y in pts) < 0}
    assert {k for k, v in drawn["from_zero"].items() if not v} <= negative
    assert drawn["from_zero"]["train loss"] is True
