"""``medibench compare``: runs of same-named models (a base and a fine-tuned ``ip2p``, ablation
variants, edit configs, K sweeps) in one table.

A row per (run label, model): ``n`` (samples with an output) and each metric's mean, after the
protocol's k reduction, caps and missing policy (the first k mode of the report's aggregation,
:func:`~medibench.protocols._values.per_sample_values`). The settings that differ between the
rows become columns: each option of the model's recorded spec (compared between rows of one
factory), its in-context settings (``icl.k``, ...), ``spec`` (8 hex digits of the spec's sha256:
any difference at all) and the run's ``seed``, ``k``, ``limit`` and ``dataset``. Each row of a
later run is paired with the first run's row of the same model (or the first run's only model)
on the samples both have a value for: ``n`` pairs, the mean difference (later - first) with its
bootstrap CI, and the permutation and Wilcoxon p-values of :func:`~medibench.stats.compare_models`.

A RUN may be a training folder (``medibench train --out DIR``, whose checkpoints were evaluated
into ``DIR/eval/step-N/``): it stands for its last evaluation (the largest ``N``), labelled by
the training folder, the step a setting (``step``) like the others.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medibench.runs._store import RunStore, RunStoreError

__all__ = [
    "COMPARED_KEY",
    "Comparison",
    "compare_runs",
    "compared_panel",
    "evaluation_run",
    "parse_labels",
    "record_comparison",
    "shown_value",
    "write_comparison",
]

_SPECS_KEY = "model_specs_by_name"  # written by medibench.runs._models
_RUN_SETTINGS = ("dataset", "seed", "k", "limit", "step")
_EVAL_STEP = re.compile(r"^step-(\d+)$")  # a training folder's eval/step-N/ (medibench.train)


@dataclass
class Comparison:
    """What :func:`compare_runs` found: ``rows`` (``label``, ``run``, ``model``, ``n``, the
    differing ``settings``, each of ``metrics``) and ``paired`` (``label``, ``model``,
    ``against``, ``metric``, ``n``, ``mean_diff``, ``ci_low``, ``ci_high``, ``permutation_p``,
    ``wilcoxon_p``); ``runs``: the run folders read (a training folder's evaluation);
    ``renames``: the ``RUN:OLD=NEW`` texts that merge those runs apart."""

    labels: list[str]
    metrics: list[str]
    settings: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    paired: list[dict[str, Any]] = field(default_factory=list)
    renames: list[str] = field(default_factory=list)
    runs: list[Path] = field(default_factory=list)


def evaluation_run(path: Path) -> tuple[Path, int | None]:
    """``(run folder, step)``: a run folder as it is (step ``None``); a training folder (no
    ``run.sqlite``, an ``eval/`` folder) as its last evaluation ``eval/step-N/`` and ``N``.

    Raises:
        RunStoreError: a training folder with no evaluated checkpoint.
    """
    if (path / "run.sqlite").is_file() or not (path / "eval").is_dir():
        return path, None
    steps = [
        (int(m.group(1)), p)
        for p in (path / "eval").iterdir()
        if (m := _EVAL_STEP.match(p.name)) and (p / "run.sqlite").is_file()
    ]
    if not steps:
        raise RunStoreError(
            f"{path}: a training folder with no evaluated checkpoint in eval/step-N/ (train "
            "with --eval-dataset and --eval-every)"
        )
    step, run = max(steps)
    return run, step


def parse_labels(texts: Sequence[str], runs: Sequence[Path]) -> list[str]:
    """Each run's label: its ``--label RUN=NAME``, else its folder name. Raises
    :class:`RunStoreError` for a RUN not among ``runs``, or two runs with one label."""
    labels = [r.resolve().name or str(r) for r in runs]
    for text in texts:
        run, eq, name = text.rpartition("=")
        if not eq or not run or not name:
            raise RunStoreError(f"--label {text!r}: expected RUN=NAME")
        at = [i for i, r in enumerate(runs) if Path(run) == r or Path(run).resolve() == r.resolve()]
        if not at:
            shown = ", ".join(map(str, runs))
            raise RunStoreError(f"--label {text!r}: {run!r} is not one of the runs ({shown})")
        for i in at:
            labels[i] = name
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise RunStoreError(f"two runs are labelled {twice[0]!r}: give them --label RUN=NAME apart")
    return labels


def compare_runs(
    runs: Sequence[str | Path],
    labels: Sequence[str] = (),
    metrics: Sequence[str] = (),
    *,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
) -> Comparison:
    """Compare the models of ``runs`` (the first is the reference); ``labels``: ``RUN=NAME``
    texts; ``metrics``: the metrics to show (``()``: every one with a value)."""
    from medibench.protocols._values import mean_value
    from medibench.stats import compare_models

    given = [Path(r) for r in runs]
    if len(given) < 1:
        raise RunStoreError("compare needs at least one run")
    names = parse_labels(labels, given)
    evaluations = [evaluation_run(p) for p in given]
    paths = [run for run, _ in evaluations]
    values: dict[tuple[int, str], dict[str, dict[str, float | None]]] = {}
    rows: list[dict[str, Any]] = []
    settings: list[dict[str, Any]] = []
    order: list[str] = []
    for i, path in enumerate(paths):
        with RunStore.open_existing(path) as store:
            per_model, found = _run_values(store)
            specs = store.get_meta(_SPECS_KEY) or {}
            config = store.get_meta("config") or {}
        order += [m for m in found if m not in order]
        step = evaluations[i][1]
        for model, (n, vals) in per_model.items():
            values[(i, model)] = vals
            rows.append({"label": names[i], "run": str(path), "model": model, "n": n})
            settings.append(
                _settings(specs.get(model), config) | ({} if step is None else {"step": step})
            )
    unknown = [m for m in metrics if m not in order]
    if unknown:
        raise RunStoreError(
            f"--metric {unknown[0]!r}: no run has it (metrics: {', '.join(order) or 'none'})"
        )
    shown = list(metrics) or [
        m for m in order if any(_finite(v) for vals in values.values() for v in vals[m].values())
    ]
    differ = _differing(settings)
    for row, mine in zip(rows, settings, strict=True):
        row.update({k: mine.get(k) for k in differ})
    for row, key in zip(rows, values, strict=True):
        for m in shown:
            row[m] = mean_value([v for v in values[key].get(m, {}).values() if v is not None])
    result = Comparison(names, shown, differ, rows)
    stats = {"n_resamples": n_resamples, "seed": seed, "level": level}
    for (i, model), vals in values.items():
        ref = _reference(values, i, model)
        if ref is None:
            continue
        for m in shown:
            pair = compare_models(
                {"a": vals.get(m, {}), "b": values[ref].get(m, {})}, metric=m, **stats
            )
            p = pair[0]
            result.paired.append(
                {
                    "label": names[i],
                    "model": model,
                    "against": f"{names[0]}/{ref[1]}",
                    "metric": m,
                    "n": p["n"],
                    "mean_diff": p["mean_diff"],
                    "ci_low": p["diff_ci_low"],
                    "ci_high": p["diff_ci_high"],
                    "permutation_p": p["permutation_p"],
                    "wilcoxon_p": p["wilcoxon_p"],
                }
            )
    result.renames = _renames(paths, names, list(values))
    result.runs = paths
    return result


def _run_values(store: RunStore):
    """``{model: (n with an output, {metric: {sample_id: value}})}`` and the metric names in
    order, over every protocol the run scored (metrics of two protocols as ``protocol/metric``)."""
    from medibench.protocols import Aggregation, load_protocol
    from medibench.protocols._values import per_sample_values

    samples = {s.sample_id: s for s in store.samples()}
    by_protocol: dict[str, list] = defaultdict(list)
    for s in store.scores():
        if s.sample_id in samples:
            by_protocol[f"{s.protocol}@{s.protocol_version}"].append(s)
    models = sorted(
        {p.model for p in store.predictions()} | {s.model or "" for s in store.scores()}
    )
    out: dict[str, tuple[int, dict]] = {m: (0, {}) for m in models}
    outputs: dict[str, set[str]] = defaultdict(set)
    found: list[str] = []
    for spec, scores in sorted(by_protocol.items()):
        try:
            proto = load_protocol(spec)
            agg, applicable = proto.aggregation, proto.applicable_metrics
            names = list(proto.metric_names)
        except (KeyError, ValueError, ImportError):  # not registered here: plain means
            agg, applicable = Aggregation(), None
            names = list(dict.fromkeys(m for s in scores for m in s.metrics))
        names += [n for n, _, _ in agg.pass_rates]
        prefix = f"{spec.partition('@')[0]}/" if len(by_protocol) > 1 else ""
        records: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for s in scores:
            records[s.model or ""][s.sample_id].append(s)
        how = agg.k_modes[0][1]
        for model, recs in records.items():
            vals = per_sample_values(recs, samples, agg, how, names, applicable=applicable)
            outputs[model].update(sid for sid, (has, _) in vals.items() if has)
            for m in names:
                out[model][1][prefix + m] = {sid: v.get(m) for sid, (_, v) in vals.items()}
        found += [prefix + m for m in names]
    return {m: (len(outputs[m]), vals) for m, (_, vals) in out.items()}, found


def _settings(spec: Mapping[str, Any] | None, config: Mapping[str, Any]) -> dict[str, Any]:
    """One row's settings: the spec's options and icl settings, its hash, the run's config."""
    got: dict[str, Any] = {k: _cell(config.get(k)) for k in _RUN_SETTINGS if k in config}
    if spec is None:
        return got
    got["factory"] = spec.get("model")
    got["spec"] = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:8]
    for key, value in (spec.get("options") or {}).items():
        if key != "name":
            got[key] = _cell(value)
    for key, value in (spec.get("icl") or {}).items():
        got[f"icl.{key}"] = _cell(value)
    return got


def _differing(settings: Sequence[Mapping[str, Any]]) -> list[str]:
    """The settings whose values differ between rows of one factory (a model's options are
    compared with the same model's; a key one of them lacks differs), and the run settings."""
    groups: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for mine in settings:
        groups[mine.get("factory")].append(mine)
    keys = list(dict.fromkeys(k for mine in settings for k in mine if k != "factory"))
    return [
        k
        for k in keys
        if any(
            len(
                {
                    json.dumps(m.get(k), sort_keys=True)
                    for m in (settings if k in _RUN_SETTINGS else group)
                }
            )
            > 1
            for group in groups.values()
        )
    ]


def _reference(values: Mapping[tuple[int, str], Any], i: int, model: str):
    """The first run's row that row (i, model) is paired with, or ``None``."""
    if i == 0:
        return None
    if (0, model) in values:
        return (0, model)
    first = [key for key in values if key[0] == 0]
    return first[0] if len(first) == 1 else None


def _renames(paths: Sequence[Path], labels: Sequence[str], keys: Sequence[tuple[int, str]]):
    """``RUN:OLD=OLD-LABEL`` for each model of a name that more than one run holds."""
    runs_of: dict[str, int] = defaultdict(int)
    for _, model in keys:
        runs_of[model] += 1
    return [f"{paths[i]}:{m}={m}-{labels[i]}" for i, m in keys if runs_of[m] > 1]


def _cell(value: Any) -> Any:
    return (
        value if isinstance(value, (str, int, float, bool)) or value is None else json.dumps(value)
    )


def _finite(v: Any) -> bool:
    return v is not None and v == v and abs(v) != float("inf")


def write_comparison(result: Comparison, *, csv: Path | None = None, json_path: Path | None = None):
    """Write the table as CSV (a row per label and model) and everything as JSON."""
    import csv as csv_module
    import io

    from medibench.io import atomic_write_text

    if csv is not None:
        buf = io.StringIO()
        columns = ["label", "run", "model", *result.settings, "n", *result.metrics]
        writer = csv_module.DictWriter(buf, columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(result.rows)
        atomic_write_text(csv, buf.getvalue())
    if json_path is not None:
        data = {
            "labels": result.labels,
            "metrics": result.metrics,
            "settings": result.settings,
            "rows": result.rows,
            "paired": result.paired,
        }
        atomic_write_text(json_path, json.dumps(_json_safe(data), indent=2) + "\n")


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not _finite(value):
        return None if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


#: The run metadata key where ``compare --out`` leaves its table for the report's panel.
COMPARED_KEY = "compared_runs"


def record_comparison(store: RunStore, result: Comparison) -> None:
    """Leave ``result`` in the merged run ``store`` (each row with the name it merged as), so
    ``medibench report`` shows the table (:func:`compared_panel`)."""
    merged_as = {}
    for text in result.renames:
        left, _, new = text.rpartition("=")
        run, _, old = left.rpartition(":")
        merged_as[(run, old)] = new
    rows = [
        {**r, "merged_as": merged_as.get((r["run"], r["model"]), r["model"])} for r in result.rows
    ]
    data = {"labels": result.labels, "metrics": result.metrics, "settings": result.settings,
            "rows": rows, "paired": result.paired}  # fmt: skip
    store.set_meta(COMPARED_KEY, _json_safe(data))


def compared_panel(store: Any, run_dir: Path) -> dict[str, Any] | None:
    """The report panel of a run merged by ``compare --out``: its table and the paired
    differences; ``None`` for any other run."""
    data = store.get_meta(COMPARED_KEY)
    if not data:
        return None
    columns = ["label", "model", "merged as", *data["settings"], "n", *data["metrics"]]
    keys = ["label", "model", "merged_as", *data["settings"], "n", *data["metrics"]]
    first = data["labels"][0]
    pair_keys = ["label", "model", "against", "metric", "n", "mean_diff", "ci_low", "ci_high",
                 "permutation_p", "wilcoxon_p"]  # fmt: skip
    tables = [
        {
            "title": "runs compared",
            "columns": columns,
            "rows": [[shown_value(r.get(k)) for k in keys] for r in data["rows"]],
            "notes": [
                "the settings that differ between the runs are columns (spec: 8 hex "
                "digits of the recorded spec's sha256); n = samples with an output"
            ],
        },  # fmt: skip
    ]
    if data["paired"]:
        tables.append(
            {
                "title": f"paired differences against {first} (row - {first}, shared samples)",
                "columns": [k.replace("_", " ") for k in pair_keys],
                "rows": [[shown_value(p.get(k)) for k in pair_keys] for p in data["paired"]],
                "notes": [
                    "95% bootstrap CI of the mean difference; p-values of the paired "
                    "permutation and Wilcoxon tests (medibench.stats.compare_models)"
                ],
            }  # fmt: skip
        )
    summary = f"{len(data['labels'])} runs, {len(data['rows'])} rows"
    return {"id": "compared-runs", "title": "Runs compared", "summary": summary, "tables": tables}


def shown_value(value: Any) -> str:
    """A table cell: ``""`` for ``None``, a float to 4 significant digits."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
