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
