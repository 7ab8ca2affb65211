"""Editing results in the run store: two tables declared through it (merge and export cover
them), and the results file beside them.

* ``edit_requests``: one row per (model, editor, setting, edit): converged, last loss, steps,
  seconds, error, its sequence.
* ``edit_results``: one row per results line (the line itself as JSON beside its key columns).

``setting`` is ``single`` or ``sequential-N``, so single and sequential runs of one model and
editor live side by side in one run folder. ``RUN/edit_results.jsonl`` holds every line of
the run (all settings), in the results format. Each (model, editor, setting) keeps its spec in
the store's meta, the editor's ``--config`` (as read) with it: a run with another config would
replace those results, so it is refused (:func:`config_conflict`) unless forced.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medibench.calls._redact import redact_value
from medibench.io import atomic_write_text
from medibench.knowledge_edit._experiment import EditRecord, EditRunReport
from medibench.knowledge_edit._results import ResultLine, parse_line

__all__ = [
    "RESULTS_FILE",
    "config_conflict",
    "declare_edit_tables",
    "edit_results",
    "edit_spec",
    "spec_key",
    "store_edit_run",
]

RESULTS_FILE = "edit_results.jsonl"

_TABLES = (
    ("edit_requests",
     "model TEXT NOT NULL, editor TEXT NOT NULL, setting TEXT NOT NULL, edit_id TEXT NOT NULL, "
     "edit_order INTEGER NOT NULL, sequence INTEGER NOT NULL, converged INTEGER, loss REAL, "
     "steps INTEGER NOT NULL, elapsed_s REAL NOT NULL, error TEXT, "
     "PRIMARY KEY (model, editor, setting, edit_id)",
     ("model", "editor", "setting", "edit_id")),
    ("edit_results",
     "model TEXT NOT NULL, editor TEXT NOT NULL, setting TEXT NOT NULL, edit_id TEXT NOT NULL, "
     "probe_id TEXT NOT NULL, stage TEXT NOT NULL, matcher TEXT NOT NULL, kind TEXT NOT NULL, "
     "task_type TEXT NOT NULL, pre_correct INTEGER, post_correct INTEGER, line TEXT NOT NULL, "
     "PRIMARY KEY (model, editor, setting, edit_id, probe_id, stage, matcher)",
     ("model", "editor", "setting", "edit_id", "probe_id", "stage", "matcher")),
)  # fmt: skip


def declare_edit_tables(store: Any) -> None:
    for name, columns, key in _TABLES:
        store.declare_table(name, columns, key, stage="knowledge_edit")


def edit_spec(*, tasks: Any, taskset: Any, limit: int | None, config: dict[str, Any],
              config_file: Any, editor: Any, matchers: list[str],
              model_options: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """What an edit run stores of its settings (:func:`store_edit_run`'s ``spec``): the task
    set's folder and manifest, ``limit``, the editor's ``--config`` as read (and its file) and
    its resolved settings, the matchers, the model's options. ``edit analyze`` makes the
    editors again from it."""
    return {"tasks": str(tasks), "taskset": taskset.manifest, "limit": limit, "config": config,
            "config_file": None if config_file is None else str(config_file),
            "editor": editor_settings(editor), "matchers": matchers,
            "model_options": model_options}  # fmt: skip


def editor_settings(editor: Any) -> dict[str, Any]:
    """An editor's settings as data (its config dataclass, or its plain attributes)."""
    config = getattr(editor, "config", None)
    if config is not None and dataclasses.is_dataclass(config) and not isinstance(config, type):
        return {"name": editor.name, **dataclasses.asdict(config)}
    plain = {k: v for k, v in vars(editor).items() if isinstance(v, (str, int, float))}
    return {"name": editor.name, **plain}


def setting_name(sequential: int) -> str:
    return f"sequential-{sequential}" if sequential > 0 else "single"


def config_conflict(store: Any, *, model: str, editor: str, sequential: int,
                    spec: dict[str, Any]) -> str | None:  # fmt: skip
    """Why a run of ``spec`` (with ``config``, the editor's ``--config`` as read, and
    ``editor``, its resolved settings) must not replace the results of (``model``, ``editor``,
    setting) that ``store`` holds: they were made with another config. ``None`` when none are
    stored or the config is the same. A spec stored before configs were kept is compared by its
    resolved editor settings. A ``mend:DIR`` run is compared by its hypernetwork's sha256."""
    setting = setting_name(sequential)
    previous = store.get_meta(spec_key(model, editor, setting))
    if previous is None:
        return None
    nets = [(x.get("editor") or {}).get("hypernetwork_sha256") for x in (previous, spec)]
    if nets[0] != nets[1]:  # mend:DIR: its settings are its hypernetwork's, not a --config
        return (
            f"{store.run_dir} holds results of model {model}, editor {editor}, {setting} made "
            f"with another hypernetwork ({previous['editor'].get('hypernetwork')}, sha256 "
            f"{nets[0]}; now {spec['editor'].get('hypernetwork')}, sha256 {nets[1]})"
        )
    key = "config" if "config" in previous else "editor"
    before, now = previous.get(key), redact_value(_plain(spec.get(key)))
    if before == now:
        return None
    made = previous.get("config_file") or "no --config"
    return (
        f"{store.run_dir} holds results of model {model}, editor {editor}, {setting} made with "
        f"another config ({made}: {json.dumps(before, sort_keys=True)}; now "
        f"{json.dumps(now, sort_keys=True)})"
    )


def store_edit_run(store: Any, report: EditRunReport, *, model: str, editor: str,
                   sequential: int, spec: dict[str, Any] | None = None) -> Path:  # fmt: skip
    """Write a run's records and lines into the store (replacing a re-run of the same model,
    editor and setting) and rewrite ``RUN/edit_results.jsonl`` from the store. ``spec`` (the
    task set's manifest, the editor's settings, the matchers) goes into the store's meta under
    ``knowledge_edit/<model>/<editor>/<setting>``."""
    declare_edit_tables(store)
    setting = setting_name(sequential)
    if spec is not None:
        store.set_meta(spec_key(model, editor, setting), redact_value(_plain(spec)))
    db = store.connection
    with store.transaction():
        for table in ("edit_requests", "edit_results"):
            db.execute(f"DELETE FROM {table} WHERE model = ? AND editor = ? AND setting = ?",
                       (model, editor, setting))  # fmt: skip
        db.executemany(
            "INSERT INTO edit_requests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [_request_row(model, editor, setting, r) for r in report.edits],
        )
        db.executemany(
            "INSERT INTO edit_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [_line_row(model, editor, setting, x) for x in report.lines],
        )
    path = store.run_dir / RESULTS_FILE
    rows = db.execute("SELECT line FROM edit_results ORDER BY rowid")
    atomic_write_text(path, "".join(text + "\n" for (text,) in rows))
    return path


def edit_results(store: Any, *, model: str | None = None, editor: str | None = None,
                 setting: str | None = None) -> list[ResultLine]:  # fmt: skip
    """The stored lines (optionally of one model, editor, setting), in insertion order."""
    names = {t.name for t in store.tables()}
    if "edit_results" not in names:
        return []
    where, args = [], []
    for col, val in (("model", model), ("editor", editor), ("setting", setting)):
        if val is not None:
            where.append(f"{col} = ?")
            args.append(val)
    sql = "SELECT setting, line FROM edit_results"
    if where:
        sql += " WHERE " + " AND ".join(where)
    out = []
    for s, text in store.connection.execute(sql + " ORDER BY rowid", args):
        line = parse_line(json.loads(text), f"{store.path} edit_results")
        out.append(dataclasses.replace(line, extra={**line.extra, "setting": s}))
    return out


def edit_groups(store: Any) -> list[tuple[str, str, str]]:
    """The (model, editor, setting) groups stored, in first-stored order."""
    if "edit_results" not in {t.name for t in store.tables()}:
        return []
    rows = store.connection.execute(
        "SELECT model, editor, setting, MIN(rowid) FROM edit_results "
        "GROUP BY model, editor, setting ORDER BY MIN(rowid)"
    )
    return [(m, e, s) for m, e, s, _ in rows]


def edit_records(store: Any) -> Sequence[tuple[Any, ...]]:
    if "edit_requests" not in {t.name for t in store.tables()}:
        return []
    return list(store.connection.execute("SELECT * FROM edit_requests ORDER BY rowid"))


def spec_key(model: str, editor: str, setting: str) -> str:
    """The store's meta key of the spec of (``model``, ``editor``, ``setting``)."""
    return f"knowledge_edit/{model}/{editor}/{setting}"


def _plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples as lists), so stored and new compare."""
    return json.loads(json.dumps(value, default=str))


def _request_row(model: str, editor: str, setting: str, r: EditRecord) -> tuple[Any, ...]:
    conv = None if r.converged is None else int(r.converged)
    return redact_value((model, editor, setting, r.edit_id, r.order, r.sequence, conv, r.loss,
                         r.steps, r.elapsed_s, r.error))  # fmt: skip


def _line_row(model: str, editor: str, setting: str, x: ResultLine) -> tuple[Any, ...]:
    def b(v: bool | None) -> int | None:
        return None if v is None else int(v)

    # answers and errors may quote a server that echoed the key: none is stored
    record = redact_value({**x.to_dict(), "setting": setting})
    line = json.dumps(record, ensure_ascii=False, sort_keys=True)
    return (model, editor, setting, x.edit_id, x.probe_id, x.stage, x.matcher, x.kind,
            x.task_type, b(x.pre_correct), b(x.post_correct), line)  # fmt: skip
