"""``medibench edit analyze RUN``: the latent-space geometry of a run's editors.

The run's store says what each ``edit run`` used: the model, the task set folder, the edits'
``--limit`` and the editor with its ``--config`` (``knowledge_edit/<model>/<editor>/<setting>``
in its meta). For every (model, editor, config) stored, the editor is made again from those, each
request is edited alone on the original model, and the hidden states are recorded
(:mod:`._latent`) and measured (:mod:`._latent_stats`). Written to ``OUT`` (default
``RUN/edit_analysis``):

* ``analysis.json``: everything below, per editor (format ``medibench-edit-analysis``);
* ``layers.csv`` (shift and separability per editor and layer), ``memory.csv`` (fire rates per
  memory editor and probe kind), ``task_types.csv`` (per editor and task type, at the key
  layer), ``items.csv`` (per editor, item and layer: distances, cosine, fired);
* ``states.npz``: the recorded states (``<editor>__pre__<layer>``, ``<editor>__post__<layer>``,
  rows in ``items.csv``'s order);
* ``shift.png``/``.svg`` (:func:`._figures.shift_lines`) and ``pca_<editor>.png``/``.svg``
  (:func:`._figures.pca_picture`, at the key layer).

``OUT`` is recorded in the run's meta (``knowledge_edit/analysis``), so ``medibench report RUN``
shows it (:func:`._report.geometry_panel`).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medibench.io import atomic_write_bytes, atomic_write_text, read_image
from medibench.knowledge_edit._answerers import TransformersAnswerer, load_answerer
from medibench.knowledge_edit._editing import decoder_layers
from medibench.knowledge_edit._editors import load_editor
from medibench.knowledge_edit._latent import PreStates, edited_layers, record_editor, resolve_layers
from medibench.knowledge_edit._latent_stats import FIRE_KINDS, item_measures, summarize_recording
from medibench.knowledge_edit._store import edit_groups, spec_key
from medibench.knowledge_edit._tasks import TaskError, read_taskset

__all__ = ["ANALYSIS_META", "AnalysisError", "analyze_run"]

#: the run's meta key that holds where ``edit analyze`` wrote its analysis
ANALYSIS_META = "knowledge_edit/analysis"
FORMAT = "medibench-edit-analysis"


class AnalysisError(ValueError):
    """A run that cannot be analysed (no edit results, a task set or model no longer there, a
    model whose hidden states cannot be read); the message names the run and what is missing."""


def analyze_run(
    store: Any,
    out: Path,
    *,
    layers: Sequence[int] | None = None,
    limit: int | None = None,
    n_resamples: int = 1000,
    seed: int = 42,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Analyse every editor ``store`` holds (module doc); returns ``analysis.json``'s data."""
    say = log or (lambda _m: None)
    run = store.run_dir
    specs = _editor_specs(store)
    models: dict[str, tuple[TransformersAnswerer, PreStates]] = {}
    editors, written = [], {}
    for model, name, spec in specs:
        if model not in models:
            models[model] = (_answerer(run, model, spec), PreStates())
        m, pre_states = models[model]
        editor = load_editor(name, dict(spec.get("config") or {}))
        chosen = resolve_layers(m, layers, editor)
        n = len(decoder_layers(m))
        edited = [i % n for i in edited_layers(editor) if i % n in chosen]
        key_layer = edited[0] if edited else chosen[-1]
        ts = _taskset(run, spec)
        cap = [c for c in (spec.get("limit"), limit) if c is not None]
        requests = ts.requests[: min(cap)] if cap else ts.requests
        images = _image_reader(ts)
        say(f"{model} / {editor.name}: {len(requests)} edits, layers {list(chosen)}")
        rec = record_editor(m, editor, requests, images, chosen, pre_states)
        summary = summarize_recording(rec, key_layer, n_resamples=n_resamples, seed=seed)
        label = editor.name if len({s[0] for s in specs}) == 1 else f"{model}: {editor.name}"
        editors.append({"label": label, "model": model, "editor": editor.name,
                        "config": spec.get("config") or {}, "layers": list(chosen),
                        "failed": [{"edit_id": e, "error": x} for e, x in rec.failed],
                        **summary})  # fmt: skip
        written[label] = rec
    data = {"format": FORMAT, "version": "1", "run": str(run), "resamples": n_resamples,
            "seed": seed, "editors": editors}  # fmt: skip
    _write(out, data, written)
    store.set_meta(ANALYSIS_META, {"out": str(Path(out).resolve())})
    return data


# -- reading the run --------------------------------------------------------------------------


def _editor_specs(store: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(model, editor, spec) of each distinct (model, editor, config) stored, in stored order."""
    groups = edit_groups(store)
    if not groups:
        raise AnalysisError(f"{store.run_dir} holds no edit results (make them with `medibench "
                            "edit run --out RUN`)")  # fmt: skip
    out, seen = [], set()
    for model, editor, setting in groups:
        spec = store.get_meta(spec_key(model, editor, setting))
        if spec is None or "tasks" not in spec:
            raise AnalysisError(f"{store.run_dir}: the results of {model} / {editor} / {setting} "
                                "were stored without their settings (an edit run from before "
                                "they were kept): run them again to analyse them")  # fmt: skip
        key = (model, editor, json.dumps(spec.get("config") or {}, sort_keys=True))
        if key not in seen:
            seen.add(key)
            out.append((model, editor, spec))
    return out


def _answerer(run: Path, model: str, spec: dict[str, Any]) -> TransformersAnswerer:
    if not Path(model).is_dir():
        raise AnalysisError(f"{run}: model {model} is not a local model folder (here, now): edit "
                            "analyze reads hidden states and needs the run's local transformers "
                            "model at the path it was run with")  # fmt: skip
    answerer = load_answerer(model, **dict(spec.get("model_options") or {}))
    if not isinstance(answerer, TransformersAnswerer):
        raise AnalysisError(f"{run}: model {model} is not a transformers model (no hidden states)")
    return answerer


def _taskset(run: Path, spec: dict[str, Any]) -> Any:
    try:
        return read_taskset(spec["tasks"])
    except TaskError as exc:
        raise AnalysisError(f"{run}: the task set it was run on cannot be read again: {exc}") \
            from None  # fmt: skip


def _image_reader(ts: Any) -> Callable[[str], np.ndarray]:
    cache: dict[str, np.ndarray] = {}

    def image(relative: str) -> np.ndarray:
        if relative not in cache:
            cache[relative] = read_image(ts.image_path(relative), mode="rgb")
        return cache[relative]

    return image


# -- writing ----------------------------------------------------------------------------------


def _write(out: Path, data: dict[str, Any], recordings: dict[str, Any]) -> None:
    from medibench.knowledge_edit._figures import pca_picture, shift_lines

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "analysis.json", json.dumps(data, indent=2))
    layer_rows, memory_rows, type_rows, item_rows = [], [], [], []
    arrays = {}
    for e in data["editors"]:
        who = {"model": e["model"], "editor": e["editor"]}
        layer_rows += [{**who, **_flat(r)} for r in e["by_layer"]]
        type_rows += [{**who, **_flat(r)} for r in e["by_task_type"]]
        if e["memory"] is not None:
            for kind in FIRE_KINDS:
                f = e["memory"]["fires"][kind]
                memory_rows.append({**who, "site": e["memory"]["site"], "kind": kind, **_flat(f)})
        rec = recordings[e["label"]]
        slug = label_stem(e["label"])
        measures = item_measures(rec)
        for layer in rec.layers:
            arrays[f"{slug}__pre__{layer}"] = rec.pre[layer]
            arrays[f"{slug}__post__{layer}"] = rec.post[layer]
            for r, it in enumerate(rec.items):
                row = {**who, **it, "layer": layer,
                       **{k: float(v[r]) for k, v in measures[layer].items()}}  # fmt: skip
                if rec.memory is not None:
                    row["fired"] = bool(rec.memory["fired"][r])
                    row["memory_distance"] = float(rec.memory["distance"][r])
                item_rows.append(row)
        key = e["key_layer"]
        if not rec.items:  # every edit failed: nothing to picture
            continue
        fired = rec.memory["fired"] if rec.memory is not None else None
        title = f"{e['label']}: decoder layer {key}, before and after each edit (PCA)"
        pca_picture(rec.items, rec.pre[key], rec.post[key], fired, title, out / f"pca_{slug}")
    for name, rows in (("layers", layer_rows), ("memory", memory_rows),
                       ("task_types", type_rows), ("items", item_rows)):  # fmt: skip
        atomic_write_text(out / f"{name}.csv", _csv(rows))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    atomic_write_bytes(out / "states.npz", buffer.getvalue())
    shift_lines(data["editors"], out / "shift")


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """A row with each interval as ``<name>_low``/``<name>_high`` columns and lists joined."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k.endswith("_ci") or k == "ci":
            low, high = v if v is not None else (None, None)
            out[f"{k}_low"], out[f"{k}_high"] = low, high
        elif isinstance(v, list):
            out[k] = "/".join(map(str, v))
        else:
            out[k] = v
    return out


def _csv(rows: list[dict[str, Any]]) -> str:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def label_stem(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "_"
