"""The statistics of ``medibench edit analyze`` on one editor's :class:`~._latent.Recording`.

Every probe is measured against its own edit request: its **key** at a layer is the request's
prompt state there (the last token's layer output, before the edit), and a probe's distance to
the key is the Euclidean distance between its state and that key (after the edit: both states
after it). For a memory-based editor the memory's own distance (to its nearest key, which in a
single edit is the edit's) and whether it fires come from the editor (``fires``).

* **Shift per layer**: the mean over items (requests and probes) of the cosine similarity of an
  item's state before and after its edit (1: unmoved) with a bootstrap CI over items; the
  linear CKA of the items' states before against after (:func:`medibench.stats.linear_cka`,
  CI resampling items).
* **Separability**: AUROC of generality against locality probes by nearness to the key
  (``P(d_generality < d_locality)``, ties half; :func:`medibench.stats.auroc`, stratified
  bootstrap CI), before and after the edit, per layer, and by the memory's distance.
* **Memory**: the fraction of each kind's probes the memory fires on: on locality probes these
  are false fires; generality probes it does not fire on are misses.
* **Per task type** (T0-T5): the same at the key layer (the first layer the editor edits that
  was recorded, else the last recorded; the memory's distance for a memory editor).

An interval resting on fewer than two values is ``None`` (tables print ``n=1``); a statistic
with no value on a side is ``None`` with its reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from medibench.knowledge_edit._latent import REQUEST, Recording
from medibench.knowledge_edit._tasks import TASK_TYPES
from medibench.stats import auroc, auroc_ci, bootstrap_ci, linear_cka, linear_cka_ci

__all__ = ["item_measures", "summarize_recording"]

FIRE_KINDS = (REQUEST, "reliability", "generality", "locality")


def item_measures(rec: Recording) -> dict[int, dict[str, np.ndarray]]:
    """Per layer: each item's ``distance_pre`` and ``distance_post`` to its edit's key and the
    ``cosine`` of its states before and after (arrays in item order)."""
    key_row = {it["edit_id"]: r for r, it in enumerate(rec.items) if it["kind"] == REQUEST}
    keys = np.array([key_row[it["edit_id"]] for it in rec.items], dtype=np.int64)
    out = {}
    for layer in rec.layers:
        pre, post = rec.pre[layer], rec.post[layer]
        norms = np.linalg.norm(pre, axis=1) * np.linalg.norm(post, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            cosine = np.where(norms > 0, np.sum(pre * post, axis=1) / norms, np.nan)
        out[layer] = {
            "distance_pre": np.linalg.norm(pre - pre[keys], axis=1),
            "distance_post": np.linalg.norm(post - post[keys], axis=1),
            "cosine": cosine,
        }
    return out


def summarize_recording(rec: Recording, key_layer: int, *, n_resamples: int = 1000,
                        seed: int = 42) -> dict[str, Any]:  # fmt: skip
    """``{"n_edits", "n_items", "key_layer", "by_layer": [...], "memory": {...} | None,
    "by_task_type": [...]}`` (module doc; every interval a ``[low, high]`` list or ``None``)."""
    kw = {"n_resamples": n_resamples, "seed": seed}
    kinds = np.array([it["kind"] for it in rec.items])
    types = np.array([it["task_type"] for it in rec.items])
    measures = item_measures(rec)
    by_layer = []
    for layer in rec.layers:
        m = measures[layer]
        row: dict[str, Any] = {"layer": layer, "n_items": len(rec.items)}
        row.update(_mean("cosine", m["cosine"], **kw))
        row.update(_cka(rec.pre[layer], rec.post[layer], **kw))
        for when in ("pre", "post"):
            d = m[f"distance_{when}"]
            row.update(_separation(f"auroc_{when}", d[kinds == "generality"],
                                   d[kinds == "locality"], **kw))  # fmt: skip
        for kind in ("generality", "locality"):
            d = m["distance_pre"][kinds == kind]
            row[f"distance_{kind}"] = float(np.median(d)) if d.size else None
        by_layer.append(row)
    memory = None
    if rec.memory is not None:
        fired, dist = rec.memory["fired"], rec.memory["distance"]
        rates = {k: _rate(fired[kinds == k], **kw) for k in FIRE_KINDS}
        memory = {"site": rec.memory["site"], "fires": rates,
                  "false_fire_rate": rates["locality"]["rate"],
                  "miss_rate": _complement(rates["generality"]["rate"]),
                  **_separation("auroc", dist[kinds == "generality"], dist[kinds == "locality"],
                                **kw)}  # fmt: skip
    key = measures[key_layer]["distance_pre"] if memory is None else rec.memory["distance"]  # type: ignore[index]
    by_type = []
    for t in TASK_TYPES:
        mine = (types == t) & (kinds != REQUEST)
        if not mine.any():
            continue
        gen, loc = mine & (kinds == "generality"), mine & (kinds == "locality")
        row = {"task_type": t, "n_generality": int(gen.sum()), "n_locality": int(loc.sum())}
        row.update(_separation("auroc", key[gen], key[loc], **kw))
        row.update(_mean("cosine", measures[key_layer]["cosine"][mine], **kw))
        if memory is not None:
            fired = rec.memory["fired"]  # type: ignore[index]
            row["locality_fire_rate"] = _rate(fired[loc], **kw)["rate"]
            row["generality_miss_rate"] = _complement(_rate(fired[gen], **kw)["rate"])
        by_type.append(row)
    edits = {it["edit_id"] for it in rec.items}
    return {"n_edits": len(edits), "n_items": len(rec.items), "key_layer": key_layer,
            "by_layer": by_layer, "memory": memory, "by_task_type": by_type}  # fmt: skip


# -- helpers ----------------------------------------------------------------------------------


def _mean(name: str, values: np.ndarray, *, n_resamples: int, seed: int) -> dict[str, Any]:
    v = values[np.isfinite(values)]
    ci = list(bootstrap_ci(v, n_resamples=n_resamples, seed=seed)) if v.size > 1 else None
    return {name: float(v.mean()) if v.size else None, f"{name}_ci": ci, f"{name}_n": int(v.size)}


def _cka(pre: np.ndarray, post: np.ndarray, *, n_resamples: int, seed: int) -> dict[str, Any]:
    try:
        value = linear_cka(pre, post)
    except ValueError as exc:  # fewer than two items, or a constant representation
        return {"cka": None, "cka_ci": None, "cka_reason": str(exc)}
    try:
        ci: list[float] | None = list(linear_cka_ci(pre, post, n_resamples=n_resamples,
                                                    seed=seed))  # fmt: skip
    except ValueError:
        ci = None
    return {"cka": value, "cka_ci": ci}


def _separation(name: str, generality: np.ndarray, locality: np.ndarray, *, n_resamples: int,
                seed: int) -> dict[str, Any]:  # fmt: skip
    """AUROC of generality against locality by nearness (the negated distance)."""
    g, lo = generality[np.isfinite(generality)], locality[np.isfinite(locality)]
    out: dict[str, Any] = {name: None, f"{name}_ci": None, f"{name}_n": [int(g.size), int(lo.size)]}
    if not g.size or not lo.size:
        out[f"{name}_reason"] = f"{g.size} generality and {lo.size} locality probe(s)"
        return out
    out[name] = auroc(-g, -lo)
    if min(g.size, lo.size) > 1:
        out[f"{name}_ci"] = list(auroc_ci(-g, -lo, n_resamples=n_resamples, seed=seed))
    return out


def _rate(fired: np.ndarray, *, n_resamples: int, seed: int) -> dict[str, Any]:
    n = int(fired.size)
    k = int(fired.sum())
    ci = list(bootstrap_ci(fired.astype(np.float64), n_resamples=n_resamples, seed=seed)) \
        if n > 1 else None  # fmt: skip
    return {"rate": k / n if n else None, "fired": k, "n": n, "ci": ci}


def _complement(rate: float | None) -> float | None:
    return None if rate is None else 1.0 - rate
