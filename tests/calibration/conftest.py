"""Shared predictions for the calibration tests: generated, small, seeded."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.calibration import as_predictions


def make_logits(n: int, c: int, seed: int, *, scale: float = 2.0, temper: float = 0.6):
    """Logits and labels drawn from ``softmax(temper * logits)``: an over-confident model
    (its probabilities are ``softmax(logits)``) with known miscalibration."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, c)) * scale
    z[np.arange(n), rng.integers(0, c, n)] += scale  # a clear favourite per row
    p_true = np.exp(temper * z - (temper * z).max(axis=1, keepdims=True))
    p_true /= p_true.sum(axis=1, keepdims=True)
    u = rng.random(n)[:, None]
    labels = (p_true.cumsum(axis=1) < u).sum(axis=1).clip(0, c - 1)
    return z, labels


@pytest.fixture
def overconfident():
    z, y = make_logits(600, 4, seed=3)
    return as_predictions(y, logits=z, groups={"domain": np.where(np.arange(600) % 3, "a", "b")})


def temperature_run(root):
    """A run folder holding ``test.npz`` and ``test_calibrated.npz`` (after a temperature fitted
    on ``val.npz`` by ``calibration fit``, applied by ``calibration apply``), each scored into
    it by ``calibration score --out`` (no bootstrap); returns ``(run, temperature)``."""
    import json

    from typer.testing import CliRunner

    from medibench.calibration import as_predictions, save_predictions
    from medibench.cli import app

    z, y = make_logits(400, 3, seed=5, temper=0.5)
    val = save_predictions(as_predictions(y[:200], logits=z[:200]), root / "val.npz")
    test = save_predictions(as_predictions(y[200:], logits=z[200:]), root / "test.npz")
    after, params, run = root / "test_calibrated.npz", root / "temperature.json", root / "run"
    for args in (
        ["fit", "--val", str(val), "--method", "temperature", "--out", str(params)],
        ["apply", str(params), str(test), "--out", str(after)],
        ["score", str(test), "--resamples", "0", "--out", str(run)],
        ["score", str(after), "--resamples", "0", "--out", str(run)],
    ):
        res = CliRunner().invoke(app, ["calibration", *args])
        assert res.exit_code == 0, res.output
    return run, json.loads(params.read_text())["params"]["temperature"]
