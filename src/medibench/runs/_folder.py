"""Scoring model outputs that already exist on disk (published outputs, another tool's run).

:func:`score_predictions` scores every (model, sample, k) of a :class:`PredictionIndex` under
each protocol, one :class:`~medibench.samples.Score` per line of the official layout: a missing
output is a ``missing`` record and an unreadable one an ``error`` record, never a 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from medibench._progress import progress_bar
from medibench.datasets import PredictionIndex, load_images
from medibench.runs._runner import score_one
from medibench.samples import Prediction, Score

__all__ = ["score_predictions"]


def score_predictions(
    dataset,
    index: PredictionIndex,
    protocols: Sequence,
    *,
    k: int | None = None,
    progress: bool = True,
    console: Console | None = None,
) -> list[Score]:
    """Score the outputs in ``index`` for every sample of ``dataset`` under each protocol.

    ``k`` is the number of outputs expected per sample (records for the absent ones are
    ``missing``); ``None`` scores what is there (a sample with none gets one ``missing`` record
    for k = 0). Records come sample by sample, so each sample's images are decoded once per
    protocol.
    """
    samples = list(dataset)
    models = index.models
    records: list[Score] = []
    total = len(protocols) * len(samples) * max(1, len(models))
    with progress_bar(progress, console, "score", total) as advance:
        for proto in protocols:
            cache: dict = {}
            for sample in samples:
                for model in models:
                    files = index.files[model].get(sample.sample_id, {})
                    ks = range(k) if k is not None else (sorted(files) or [0])
                    for j in ks:
                        path = files.get(j)
                        pred = Prediction(
                            sample_id=sample.sample_id,
                            model=model,
                            k=j,
                            path=str(path.resolve()) if path else None,
                            status="ok" if path else "error",
                            error=None if path else f"no output for k={j}",
                        )
                        records.append(
                            score_one(dataset.root, sample, pred, proto, load_images, cache)
                        )
                    advance()
    return records
