"""The report of a large run, in memory that does not grow with its samples' details.

A run of 100,000 samples (MieDB-100k) cannot be held as records while its report is built: a
live :class:`~medibench.samples.Sample` is ~2 KB, its prediction and scores as much again, its
entry in the sample browser ~5 KB. The report therefore reads the run store three ways:

* :class:`LeanSamples`: the run's samples by id, each a :class:`LeanSample` that holds the
  fields the tables group by (``benchmark, split, task, region, modality, perspective``) and
  reads the rest of its record from the store when asked (285 bytes a sample against 2.1 KB
  for the live records, measured with tracemalloc on 10,000 samples);
* :class:`StoredScores`: one protocol version's score records, read from the store each time
  they are iterated (the tables stream them into
  :class:`~medibench.protocols._values.ValueColumns`);
* :class:`BrowserIndex`: one pass over the predictions and one over the scores give, per sample
  and model, the output the browser shows, whether it failed and its values (arrays); from them
  the browser's index (``index.html``, written piece by piece) and its opening order. The
  samples' details are then built a page at a time (:meth:`BrowserIndex.page`), in that order,
  from the store, and written to ``samples/page-NNNN.js`` as they come.

What the page shows is what :func:`~medibench.report._browser.browser_pages` makes of the whole
blob (:func:`~medibench.report._browser.sample_browser_data`); ``tests/report`` holds the two
equal.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

import numpy as np

from medibench._packed import MadeWhenLookedUp
from medibench.report._browser import (
    PAGE_SIZE,
    _json_number,
    _judge_data,
    browser_page,
    sample_browser_data,
)
from medibench.runs import RunStore
from medibench.samples import Sample, Score

__all__ = ["BrowserIndex", "LeanSample", "LeanSamples", "StoredScores", "json_chunks"]

#: The sample fields a :class:`LeanSample` holds (what the tables group by); the others are
#: read from the store when asked.
LEAN_FIELDS = ("sample_id", "benchmark", "split", "task", "region", "modality", "perspective")


class LeanSample:
    """A sample's grouping fields, the rest of its record read from the run store on access
    (and pickled as the whole :class:`~medibench.samples.Sample`)."""

    __slots__ = (*LEAN_FIELDS, "_load")

    def __init__(self, sample: Sample, load: Callable[[str], Sample]) -> None:
        for name in LEAN_FIELDS:
            value = getattr(sample, name)
            setattr(self, name, sys.intern(value) if type(value) is str else value)
        self._load = load

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._load(self.sample_id), name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_same, (self._load(self.sample_id),))


def _same(sample: Sample) -> Sample:
    return sample


class LeanSamples(MadeWhenLookedUp[LeanSample]):
    """The run's samples by id, in stored order (:class:`LeanSample` each)."""

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self._last: tuple[str, Sample] | None = None  # consecutive reads of one sample
        rows = store.connection.execute("SELECT record FROM samples ORDER BY rowid")
        self._stored: dict[str, LeanSample] = {}
        for (record,) in rows:
            s = Sample.from_json(record)
            self._stored[sys.intern(s.sample_id)] = LeanSample(s, self.load)
        self._row = {sid: i for i, sid in enumerate(self._stored)}

    def load(self, sample_id: str) -> Sample:
        """The sample's whole record, from the store."""
        if self._last is None or self._last[0] != sample_id:
            self._last = (sample_id, self._store.samples_of([sample_id])[sample_id])
        return self._last[1]

    def row(self, sample_id: str) -> int | None:
        """The sample's position in the run (``None``: not one of its samples)."""
        return self._row.get(sample_id)

    def _make(self, key: str, stored: LeanSample) -> LeanSample:
        return stored


class StoredScores:
    """One protocol version's score records, read from the store each time they are iterated."""

    def __init__(self, store: RunStore, protocol: str, version: str) -> None:
        self._store, self._protocol, self._version = store, protocol, version

    def __iter__(self) -> Iterator[Score]:
        return self._store.iter_scores(self._protocol, self._version)


class BrowserIndex:
    """Per sample and model: the ``k`` of the output the browser shows, whether it failed and
    its value per metric of ``metrics`` (``[protocol label, metric, lower_is_better]``), from
    one pass over the run's predictions and one over its scores."""

    def __init__(
        self,
        store: RunStore,
        samples: LeanSamples,
        models: Sequence[str],
        metrics: Sequence[Sequence[Any]],
    ) -> None:
        self.store, self.samples, self.models = store, samples, list(models)
        self.ids = list(samples)
        self.metrics = [list(m) for m in metrics]
        n, n_models, n_metrics = len(samples), len(self.models), len(self.metrics)
        model_at = {m: i for i, m in enumerate(self.models)}
        # The shown prediction: the lowest k that is ok, else the lowest k; rank (failed, k).
        self.k = np.zeros((n, n_models), dtype=np.int64)
        rank = np.full((n, n_models, 2), np.iinfo(np.int64).max, dtype=np.int64)
        for p in store.iter_predictions():
            i, mi = samples.row(p.sample_id), model_at.get(p.model)
            if i is None or mi is None:
                continue
            key = (int(p.status != "ok"), p.k)
            if key < tuple(rank[i, mi]):
                rank[i, mi] = key
                self.k[i, mi] = p.k
        has = rank[:, :, 0] != np.iinfo(np.int64).max
        self.failed = ~has | (rank[:, :, 0] == 1)
        del rank
        self.values = np.full((n, n_models, max(n_metrics, 1)), np.nan)
        column = {(label, name): j for j, (label, name, _) in enumerate(self.metrics)}
        for sc in store.iter_scores():
            i, mi = samples.row(sc.sample_id), model_at.get(sc.model or "")
            if i is None or mi is None or sc.k != self.k[i, mi]:
                continue
            self.failed[i, mi] |= sc.status != "ok"
            label = f"{sc.protocol}@{sc.protocol_version}"
            for name, v in sc.metrics.items():
                j = column.get((label, name))
                if j is not None:
                    self.values[i, mi, j] = np.nan if v is None else v
        self.order = self._default_order()

    def _default_order(self) -> list[int]:
        """:func:`~medibench.report._browser.default_order` on the arrays."""
        n = len(self.samples)
        failed = self.failed.any(axis=1) if self.models else np.zeros(n, dtype=bool)
        worst = np.full(n, np.nan)
        if self.metrics and self.models:
            lower = bool(self.metrics[0][2])
            first = -self.values[:, :, 0] if lower else self.values[:, :, 0]
            with np.errstate(all="ignore"):
                seen = ~np.isnan(first).all(axis=1)
                worst[seen] = np.nanmin(first[seen], axis=1)
            worst[failed] = np.nan
        none = np.isnan(worst)
        key = np.where(none, 0.0, worst)
        return np.lexsort((np.arange(n), key, none, failed)).tolist()

    def index_chunks(self, chunk: int = 2048) -> Iterator[str]:
        """The JSON text of the browser's ``index`` (what
        :func:`~medibench.report._browser.browser_pages` puts in the head), piece by piece."""
        ids = self.ids
        fields = {"task": "tasks", "region": "regions", "modality": "modalities"}
        codes = []
        yield '{"ids":'
        yield from json_chunks(ids, chunk)
        for field, vocab in fields.items():
            names = sorted({getattr(s, field) for s in self.samples.values() if getattr(s, field)})
            code = {name: i for i, name in enumerate(names)}
            codes.append([code.get(getattr(self.samples[sid], field)) for sid in ids])
            yield f',"{vocab}":'
            yield from json_chunks(names, chunk)
        yield ',"codes":'
        yield from json_chunks(zip(*codes, strict=True), chunk, list)
        del codes
        yield ',"failed":'
        yield from json_chunks(self.failed, chunk, lambda row: np.flatnonzero(row).tolist())
        yield ',"values":'
        yield from json_chunks(self.values, chunk, self._values_of)
        yield ',"order":'
        yield from json_chunks(self.order, chunk)
        yield "}"

    def _values_of(self, per_model: np.ndarray) -> list[list[float | str | None]]:
        n_metrics = len(self.metrics)
        return [[_json_number(float(v)) for v in row[:n_metrics]] for row in per_model]

    def page(
        self,
        samples: Sequence[Sample],
        shown: Mapping[tuple[str, str], Any],
        pictures: Sequence[dict[str, Any]],
        decorate: Callable[[dict[str, Any]], Any] = lambda blob: None,
        **context: Any,
    ) -> dict[str, Any]:
        """A page of the browser: the details of its ``samples`` (in page order, with their
        shown predictions and pictures) and the judges' answers they link to, as
        :func:`~medibench.report._browser.browser_pages` makes it; ``decorate(blob)`` adds to
        the page's blob (attention, demonstrations), ``context`` holds the other arguments of
        :func:`~medibench.report._browser.sample_browser_data`."""
        scores = self.store.scores_of(self.models, [s.sample_id for s in samples])
        blob = sample_browser_data(
            samples, self.models, shown, pictures, scores, self.metrics, **context
        )
        decorate(blob)
        return browser_page(blob["samples"], blob["answers"])

    def page_rows(self, number: int) -> list[int]:
        """The run positions of page ``number``'s samples, in page order."""
        return self.order[(number - 1) * PAGE_SIZE : number * PAGE_SIZE]

    def judges(self, judgements: Mapping[str, Any]) -> dict[str, Any]:
        """The head's ``judges``: those of the shown outputs, in the order the samples and
        models first show them (:func:`~medibench.report._browser.sample_browser_data`)."""
        model_at = {m: i for i, m in enumerate(self.models)}
        shown = []
        for (model, sid, k), entries in judgements.get("outputs", {}).items():
            i, mi = self.samples.row(sid), model_at.get(model)
            if i is not None and mi is not None and k == self.k[i, mi] and entries:
                shown.append((i, mi, entries))
        runs = [
            {"runs": [{"judge": entries}]} for *_, entries in sorted(shown, key=lambda t: t[:2])
        ]
        index = {(label, name): j for j, (label, name, _) in enumerate(self.metrics)}
        return _judge_data(runs, judgements, index)["judges"]

    @property
    def pages(self) -> int:
        return math.ceil(len(self.samples) / PAGE_SIZE)


def json_chunks(
    items: Iterable[Any], chunk: int, convert: Callable[[Any], Any] | None = None
) -> Iterator[str]:
    """The JSON array of ``items`` (each through ``convert``), ``chunk`` items a piece."""
    it = iter(items)
    yield "["
    sep = ""
    while batch := [convert(x) if convert else x for x in islice(it, chunk)]:
        yield sep + json.dumps(batch, separators=(",", ":"), allow_nan=False)[1:-1]
        sep = ","
    yield "]"
