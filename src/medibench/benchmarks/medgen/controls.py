"""MedGEN-Bench's pairing-sensitivity test: how much a score drops when the input image is
replaced by a control (the paper: Delta 2.16 blank / 1.07 unrelated / 0.57 same-modality on
the reference-free judge score of 1,000 cases).

:func:`derive_controls` writes the control variant of a sample set as a prepared folder
(``vqa.jsonl`` / ``gen.jsonl`` / ``edit.jsonl`` and its images), so the same models and judges
run on it with ``medgen:OUT/vqa.jsonl``. Every sample keeps its id, instruction and expected
output; its input image(s) become:

* ``blank``: black images of the same sizes;
* ``unrelated``: the input images of another sample of the benchmark of **another modality**;
* ``same-modality``: the input images of another sample of the **same modality**.

The donor is drawn with ``random.Random`` seeded from ``sha256(seed | control | sample id)``
(independent of sample order), among the set's own samples; it is recorded in each record's
``control`` (``kind``, ``seed``, ``drawn_from``) and in ``controls.json``. A sample without a
possible donor (no other sample of another / the same modality) is left out, listed there.

:func:`pairing_sensitivity` pairs a run on the original samples with runs on control sets by
(model, sample, k) and reports ``Delta = mean(original - control)`` of a metric (default the
reference-free ``overall_nogt``) with a paired bootstrap CI (:func:`medibench.stats.bootstrap_ci`
of the per-sample differences).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from medibench.io import atomic_write_text, read_image, write_image
from medibench.samples import Sample

__all__ = [
    "CONTROLS",
    "TABLE",
    "DeltaRow",
    "derive_controls",
    "pairing_panel",
    "pairing_sensitivity",
    "sensitivity_table",
    "store_rows",
]

Control = Literal["blank", "unrelated", "same-modality"]
CONTROLS: tuple[str, ...] = get_args(Control)
#: The run-store table of the original run that holds its Delta rows (the report's panel).
TABLE = "pairing_sensitivity"
_COLUMNS = (
    "control TEXT NOT NULL, model TEXT NOT NULL, metric TEXT NOT NULL, control_run TEXT NOT NULL, "
    "n INTEGER, original REAL, controlled REAL, delta REAL, ci_low REAL, ci_high REAL, "
    "created REAL, PRIMARY KEY (control, model, metric, control_run)"
)
_FILES = {"VQA": "vqa.jsonl", "MultimodalGeneration": "gen.jsonl", "ImageEditing": "edit.jsonl"}
_CATEGORY = {"VQA": "VQA", "MultimodalGeneration": "MMGeneration", "ImageEditing": "ImageEdit"}


def derive_controls(
    samples: Sequence[Sample], control: str, seed: int, out: str | Path, *, source: str = ""
) -> dict[str, Any]:
    """Write the ``control`` variant of ``samples`` to the folder ``out`` (module docstring).

    Returns the manifest written to ``out/controls.json``: ``control``, ``seed``, ``source``,
    ``samples`` (id -> drawn-from id, ``None`` for blank), ``left_out`` (id -> why).

    Raises:
        ValueError: an unknown control, or ``out`` holding files already.
    """
    if control not in CONTROLS:
        raise ValueError(f"unknown control {control!r}; choose one of {', '.join(CONTROLS)}")
    folder = Path(out)
    if folder.exists() and any(folder.iterdir()):
        raise ValueError(f"{folder} is not empty: write a control set to a new folder")
    (folder / "images").mkdir(parents=True, exist_ok=True)
    drawn: dict[str, str | None] = {}
    left_out: dict[str, str] = {}
    lines: dict[str, list[str]] = {}
    for sample in samples:
        donor = None
        if control != "blank":
            donor, why = _donor(sample, samples, control, seed)
            if donor is None:
                left_out[sample.sample_id] = why
                continue
        inputs = _control_inputs(sample, donor, folder)
        record = _record(sample, inputs, folder, control, seed, donor)
        fmt = sample.metadata.get("format") or "ImageEditing"
        lines.setdefault(_FILES[fmt], []).append(json.dumps(record))
        drawn[sample.sample_id] = donor.sample_id if donor else None
    for file, rows in lines.items():
        atomic_write_text(folder / file, "".join(r + "\n" for r in rows))
    manifest = {
        "control": control,
        "seed": seed,
        "source": source,
        "samples": drawn,
        "left_out": left_out,
    }
    atomic_write_text(folder / "controls.json", json.dumps(manifest, indent=1))
    return manifest


@dataclass(frozen=True)
class DeltaRow:
    """The drop of ``metric`` from the original to one control, for one model."""

    control: str
    model: str
    metric: str
    n: int
    original: float
    controlled: float
    delta: float
    ci_low: float | None  # None from one pair (no spread to resample)
    ci_high: float | None
    control_run: str = ""


def pairing_sensitivity(
    original: Any,
    controls: Iterable[Any],
    *,
    metric: str = "overall_nogt",
    protocol: str = "medgen@code",
    n_resamples: int = 1000,
    seed: int = 42,
) -> list[DeltaRow]:
    """Delta per control run and model (module docstring). ``original`` and ``controls`` are
    :class:`~medibench.runs.RunStore` s; a control run's kind is read from its samples."""
    from medibench.stats import bootstrap_ci, paired_values

    name, _, version = protocol.partition("@")
    base = _values(original, name, version, metric)
    rows: list[DeltaRow] = []
    for store in controls:
        kinds = {(s.metadata.get("control") or {}).get("kind") for s in store.samples()}
        kind = ", ".join(sorted(k for k in kinds if k)) or "unknown"
        other = _values(store, name, version, metric)
        for model in sorted(set(base) & set(other)):
            ids, a, b = paired_values(base[model], other[model])
            if not ids:
                continue
            diffs = np.asarray(a) - np.asarray(b)
            low, high = (
                bootstrap_ci(diffs, n_resamples=n_resamples, seed=seed)
                if len(diffs) > 1
                else (None, None)
            )
            rows.append(
                DeltaRow(
                    kind,
                    model,
                    metric,
                    len(ids),
                    float(np.mean(a)),
                    float(np.mean(b)),
                    float(diffs.mean()),
                    low,
                    high,
                    str(getattr(store, "run_dir", "")),
                )
            )
    return rows


def sensitivity_table(rows: Sequence[DeltaRow]) -> str:
    """The report section: a Markdown table of :class:`DeltaRow` s."""
    from medibench.stats import interval_text

    out = [
        "## Pairing sensitivity",
        "",
        "Delta = mean(original - control) over paired samples; 95% paired bootstrap CI.",
        "",
        "| control | model | metric | n | original | control | Delta | 95% CI |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r.control} | {r.model} | {r.metric} | {r.n} | {r.original:.3f} | "
            f"{r.controlled:.3f} | {r.delta:.3f} | {interval_text(r.ci_low, r.ci_high, r.n)} |"
        )
    return "\n".join(out) + "\n"


def store_rows(store: Any, rows: Sequence[DeltaRow]) -> None:
    """Keep ``rows`` in the original run's store (table :data:`TABLE`), replacing earlier rows
    of the same control, model, metric and control run."""
    import time

    store.declare_table(TABLE, _COLUMNS, ("control", "model", "metric", "control_run"),
                        stage="analysis", per_output=False)  # fmt: skip
    with store.transaction():
        for r in rows:
            values = (r.control, r.model, r.metric, r.control_run, r.n, r.original,
                      r.controlled, r.delta, r.ci_low, r.ci_high, time.time())  # fmt: skip
            store.connection.execute(
                f"INSERT OR REPLACE INTO {TABLE} VALUES ({', '.join('?' * len(values))})", values
            )


def pairing_panel(store: Any, run_dir: Path) -> dict[str, Any] | None:
    """The report panel (:mod:`medibench.report._panels`) of the stored Delta rows, or ``None``."""
    from medibench.stats import interval_text

    rows = store.records(TABLE)
    if not rows:
        return None
    lines = [
        [r["control"], r["model"], r["metric"], str(r["n"]), f"{r['original']:.3f}",
         f"{r['controlled']:.3f}", f"{r['delta']:.3f}",
         interval_text(r["ci_low"], r["ci_high"], r["n"]), r["control_run"]]
        for r in rows
    ]  # fmt: skip
    table = {
        "title": "Delta = mean(original - control), paired by sample",
        "columns": ["control", "model", "metric", "n", "original", "control", "Delta", "95% CI",
                    "control run"],
        "rows": lines,
        "notes": ["95% CI: paired bootstrap of the per-sample differences (1,000 resamples)",
                  "control sets: medibench medgen controls (donors seeded and recorded)"],
    }  # fmt: skip
    return {"id": "pairing-sensitivity", "title": "Pairing sensitivity", "tables": [table]}


def rows_as_json(rows: Sequence[DeltaRow]) -> str:
    """The rows as a JSON list."""
    return json.dumps([asdict(r) for r in rows], indent=1)


# -- helpers ----------------------------------------------------------------------------------
def _donor(
    sample: Sample, samples: Sequence[Sample], control: str, seed: int
) -> tuple[Sample | None, str]:
    same = control == "same-modality"
    pool = [
        s
        for s in samples
        if s.sample_id != sample.sample_id and (s.modality == sample.modality) == same
    ]
    if not pool:
        which = "the same" if same else "another"
        return None, f"no other sample of {which} modality than '{sample.modality or '?'}'"
    digest = hashlib.sha256(f"{seed}|{control}|{sample.sample_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big")).choice(pool), ""


def _inputs_of(sample: Sample) -> list[str]:
    return list(sample.metadata.get("input_images") or [sample.input])


def _control_inputs(sample: Sample, donor: Sample | None, folder: Path) -> list[str]:
    refs = []
    if donor is None:
        for i, path in enumerate(_inputs_of(sample)):
            shape = read_image(path, mode="rgb").shape
            name = f"images/{sample.sample_id}_blank_{i}.png"
            write_image(folder / name, np.zeros(shape, np.uint8))
            refs.append(name)
        return refs
    for i, path in enumerate(_inputs_of(donor)):
        name = f"images/{sample.sample_id}_from_{donor.sample_id}_{i}{Path(path).suffix}"
        shutil.copyfile(path, folder / name)
        refs.append(name)
    return refs


def _record(
    sample: Sample, inputs: list[str], folder: Path, control: str, seed: int, donor
) -> dict[str, Any]:
    md = sample.metadata
    fmt = md.get("format") or "ImageEditing"
    record: dict[str, Any] = {
        "sample_id": md.get("medgen_sample_id") or sample.sample_id,
        "category": _CATEGORY[fmt],
        "paper_format": fmt,
        "paper_task": md.get("paper_task") or sample.task,
        "paper_subtask": md.get("subtask") or None,
        "instruction": sample.instruction,
        "modality": sample.modality,
        "input_images": inputs,
        "input_image": inputs[0],
        "control": {
            "kind": control,
            "seed": seed,
            "drawn_from": donor.sample_id if donor else None,
            "original_input_images": _inputs_of(sample),
        },
    }
    expected = md.get("expected") or {}
    answer = expected.get("sections") or expected.get("text") or md.get("answer")
    if answer:
        record["answer"] = answer
    if md.get("choices"):
        record["choice"] = md["choices"]
    if sample.target:
        name = f"images/{sample.sample_id}_gt{Path(sample.target).suffix}"
        shutil.copyfile(sample.target, folder / name)
        record["ground_truth_image"] = name
    return record


def _values(store: Any, name: str, version: str, metric: str) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for s in store.scores(name):
        if s.protocol_version == version and s.status == "ok" and s.k == 0:
            out.setdefault(s.model or "", {})[s.sample_id] = s.metrics.get(metric)
    return out
