"""What a run is asked to do: :class:`RunConfig`, the one input of :func:`medibench.runs.run`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["ExecutorName", "RunConfig", "RunError", "Stage"]

Stage = Literal["generate", "score", "all"]
ExecutorName = Literal["local", "ray"]

_STAGES = ("generate", "score", "all")
_EXECUTORS = ("local", "ray")
#: ``icl_select`` values (:mod:`medibench.runs._icl`).
ICL_SELECTIONS = ("random", "same-task", "same-modality", "nearest")
#: ``icl_fallback`` values: what a sample with fewer eligible demonstrations than K gets.
ICL_FALLBACKS = ("refuse", "random", "fewer")


class RunError(Exception):
    """A run cannot start or go on: an unknown dataset, model or protocol, a bad option, a
    model spec that clashes with the run's, no Ray cluster. The message is one line saying
    what to change; what finished before is stored."""


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs; the same config on the same folder resumes the run.

    Attributes:
        dataset: a dataset spec, ``KIND:ARG`` (``native:DIR``, ``suite:DIR``) or a folder.
        models: model specs: ``NAME``, ``NAME:ARG``, a YAML spec file or ``module:callable``.
        out: the run folder (created if missing); ``{shard}`` in it becomes ``i-of-n``.
        protocols: ``name@version`` specs to score by; ``()``: the dataset's defaults.
        k: outputs per sample, each with its own seed.
        seed: the run seed; per-(sample, k) seeds derive from it.
        stage: ``"generate"``, ``"score"`` or ``"all"``.
        only_failed: re-run only failed items (refused ones included).
        retry_refused: ask again for the edits a model refused (a plain re-run does not).
        model_options: ``key=value`` options given to every model.
        executor: ``"local"`` (this process) or ``"ray"`` (model actors and scoring tasks).
        workers: items in flight (local) or model actors (Ray); ``None``: the default.
        ray_address: the Ray cluster to join; ``None``: a local one.
        shard: ``"i/n"``: run that shard of the samples; ``None``: from RANK/WORLD_SIZE or
            SLURM_PROCID/SLURM_NTASKS when set, else every sample.
        limit: run only the dataset's first ``limit`` samples (as lm-eval's ``--limit``); with
            a shard, the shard's share of them, so the shards of a limited run merge into the
            unsharded limited run. ``None``: all of them. A later run with a larger limit (or
            none) adds the rest.
        dataset_options: keyword arguments for the dataset loader (the suite's ``name`` and
            ``seed``, for instance).
        max_cost: USD budget for the paid calls of the generate stage in this run folder (API
            models, charged their ``price_per_image`` per answered request; earlier runs' spend
            counts); past it no further request is sent and the items stay to do. ``None``: no
            limit. Needs a price for every API model, and the local executor.
        icl_k: in-context demonstrations per query (``--icl-k``, repeatable): each value runs
            every model as its own entry ``NAME@icl-K``; ``()``: no demonstrations, plain names.
        icl_pool: the dataset spec demonstrations come from; ``None``: the run's dataset.
        icl_select: ``random``, ``same-task``, ``same-modality`` or ``nearest``.
        icl_embedding: the image embedding of ``nearest``: ``thumbnail`` (no weights) or any
            ``--features`` spec (:func:`medibench.analysis.features.load_extractor`).
        icl_fallback: a sample with fewer eligible demonstrations than K: ``refuse`` (not
            made, status ``too-few-demonstrations``), ``random`` (the rest drawn from the
            whole pool, the leakage rules kept) or ``fewer`` (shown those there are).

    Lists are stored as tuples and ``out`` as a ``Path``.
    """

    dataset: str
    models: tuple[str, ...]
    out: Path
    protocols: tuple[str, ...] = ()
    k: int = 1
    seed: int = 0
    stage: Stage = "all"
    only_failed: bool = False
    retry_refused: bool = False
    model_options: tuple[str, ...] = ()
    executor: ExecutorName = "local"
    workers: int | None = None
    ray_address: str | None = None
    shard: str | None = None
    limit: int | None = None
    dataset_options: Mapping[str, Any] = field(default_factory=dict)
    max_cost: float | None = None
    icl_k: tuple[int, ...] = ()
    icl_pool: str | None = None
    icl_select: str = "random"
    icl_embedding: str = "thumbnail"
    icl_fallback: str = "refuse"

    def __post_init__(self) -> None:
        for name in ("models", "protocols", "model_options"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        object.__setattr__(self, "out", Path(self.out))
        object.__setattr__(self, "dataset_options", dict(self.dataset_options))
        if self.stage not in _STAGES:
            raise ValueError(f"stage must be generate, score or all, not {self.stage!r}")
        if self.executor not in _EXECUTORS:
            raise ValueError(f"executor must be local or ray, not {self.executor!r}")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if self.max_cost is not None and not self.max_cost >= 0:
            raise ValueError(f"max_cost must be >= 0 (USD), got {self.max_cost}")
        icl = (self.icl_k,) if isinstance(self.icl_k, int) else tuple(int(k) for k in self.icl_k)
        object.__setattr__(self, "icl_k", icl)
        if any(k < 0 for k in icl) or len(set(icl)) != len(icl):
            raise ValueError(f"icl_k values must be distinct and >= 0, got {list(icl)}")
        if self.icl_select not in ICL_SELECTIONS:
            known = ", ".join(ICL_SELECTIONS)
            raise ValueError(f"icl_select must be one of {known}, not {self.icl_select!r}")
        if self.icl_fallback not in ICL_FALLBACKS:
            known = ", ".join(ICL_FALLBACKS)
            raise ValueError(f"icl_fallback must be one of {known}, not {self.icl_fallback!r}")

    @property
    def generates(self) -> bool:
        """Whether the run makes model outputs (stage ``generate`` or ``all``)."""
        return self.stage in ("generate", "all")

    @property
    def scores(self) -> bool:
        """Whether the run scores outputs (stage ``score`` or ``all``)."""
        return self.stage in ("score", "all")
