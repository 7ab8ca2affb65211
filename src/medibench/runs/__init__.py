"""Runs: the SQLite run store and the resumable stage runner."""

from medibench.runs._folder import score_predictions
from medibench.runs._runner import (
    StageReport,
    generate,
    record_environment,
    resolve_model,
    score,
    score_one,
    seed_for,
)
from medibench.runs._store import RunStore, RunStoreError

__all__ = [
    "RunStore",
    "RunStoreError",
    "StageReport",
    "generate",
    "record_environment",
    "resolve_model",
    "score",
    "score_one",
    "score_predictions",
    "seed_for",
]
