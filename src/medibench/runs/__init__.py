"""Runs: :func:`run` from a :class:`RunConfig`, the SQLite run store, the resumable stages and
the run folder's lock."""

from medibench._identity import output_folder
from medibench.runs._config import RunConfig, RunError
from medibench.runs._folder import score_predictions
from medibench.runs._lock import RunFolderInUse, run_folder_lock
from medibench.runs._run import RunPlan, plan_run, run
from medibench.runs._runner import (
    StageReport,
    generate,
    record_environment,
    score,
    score_one,
    seed_for,
)
from medibench.runs._store import RunStore, RunStoreError

__all__ = [
    "RunConfig",
    "RunError",
    "RunFolderInUse",
    "RunPlan",
    "RunStore",
    "RunStoreError",
    "StageReport",
    "generate",
    "output_folder",
    "plan_run",
    "record_environment",
    "run",
    "run_folder_lock",
    "score",
    "score_one",
    "score_predictions",
    "seed_for",
]
