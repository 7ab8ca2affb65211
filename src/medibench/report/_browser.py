"""The sample browser's data: which output each model shows, its scores, failures, and what
the judges said about it.

:func:`sample_browser_data` makes the JSON blob the page embeds (``file://`` pages cannot fetch):
per sample its fields and pictures, and per model the first output that exists, the scores of
that output under every protocol (values aligned with ``metrics``), whether it failed (no
output, or a score that is not ``ok``) and the judges' answers to it (:func:`read_judgements`:
what ``medibench judge`` stored in the run).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medibench.registry import import_object
from medibench.samples import Prediction, Sample, Score

__all__ = [
    "JUDGEMENT_READER",
    "PAGE_SIZE",
    "attach_demonstrations",
    "browser_page",
    "browser_pages",
    "image_jobs",
    "read_judgements",
    "reference_text",
    "sample_browser_data",
    "short_error",
    "text_answer",
]

#: Samples per page of the browser, and per data file (``samples/page-NNNN.js``) beside the page.
PAGE_SIZE = 48

#: Characters of a text answer or reference the page holds (the file keeps all of it).
TEXT_LIMIT = 6000

#: Reads the judges' answers per output from a run (imported by name: the judges import the
#: report's table writers, so the report does not import the judges).
JUDGEMENT_READER = "medibench.judges._view:sample_judgements"


def shown_predictions(
    predictions: Sequence[Prediction], models: Sequence[str]
) -> dict[tuple[str, str], Prediction]:
    """Per (model, sample): the prediction the browser shows, the lowest ``k`` that is ``ok``,
    else the lowest ``k`` (whose error is then shown)."""
    best: dict[tuple[str, str], Prediction] = {}
    for p in predictions:
        key = (p.model, p.sample_id)
        cur = best.get(key)
        rank = (p.status != "ok", p.k)
        if cur is None or rank < (cur.status != "ok", cur.k):
            best[key] = p
    return best


def image_jobs(
    samples: Sequence[Sample],
    models: Sequence[str],
    shown: Mapping[tuple[str, str], Prediction],
    run_dir: Path,
) -> list[dict[str, Any]]:
    """One :mod:`~medibench.report._images` job per sample (outputs indexed like ``models``)."""
    jobs = []
    for s in samples:
        outputs: list[tuple[int, str | None, str | None]] = []  # (index, path, why missing)
        for i, model in enumerate(models):
            p = shown.get((model, s.sample_id))
            if p is None:
                outputs.append((i, None, "no prediction (not generated)"))
            elif p.status != "ok" or not p.path:
                outputs.append((i, None, f"prediction failed: {p.error or 'no file'}"))
            else:
                path = Path(p.path)
                path = path if path.is_absolute() else run_dir / path
                if path.suffix.lower() == ".txt":  # a text answer: its image beside it, if any
                    image = path.with_suffix(".png")
                    outputs.append((i, str(image) if image.is_file() else None, None))
                else:
                    outputs.append((i, str(path), None))
        jobs.append(
            {
                "sid": s.sample_id,
                "input": s.input,
                "target": s.target,
                "mask": s.mask,
                "outputs": outputs,
            }
        )
    return jobs


def read_judgements(db: sqlite3.Connection) -> dict[str, Any]:
    """What the judges said about each output of the run (``outputs``, ``judges``, ``answers``:
    :func:`medibench.judges._view.sample_judgements`); all three empty for a run never judged."""
    result: dict[str, Any] = import_object(JUDGEMENT_READER)(db)
    return result


def sample_browser_data(
    samples: Sequence[Sample],
    models: Sequence[str],
    shown: Mapping[tuple[str, str], Prediction],
    pictures: Sequence[dict[str, Any]],
    scores: Sequence[Score],
    metrics: Sequence[Sequence[Any]],
    judgements: Mapping[str, Any],
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """The blob: ``models``, ``metrics`` (``[protocol label, metric, lower_is_better]``),
    ``samples``, ``judges`` and ``answers``; each sample has ``id, task, region, modality,
    perspective, instruction, pics`` and ``runs`` (one per model: ``k, output, diff, status,
    error, error_short, text, v, score_error, notes, failed, judge``); ``text`` is an answering
    model's text answer, ``reference`` the sample's reference answer (``metadata.answer``),
    ``error_short`` the error class and first clause (:func:`short_error`).

    ``judge`` lists the judges of the shown output (``judge``, ``judge_model``, ``endpoint``,
    ``passes``: ids in ``answers``, in pass order) from ``judgements`` (:func:`read_judgements`);
    ``answers`` holds only the answers some shown output links to, each once, with a
    ``rationale`` that is a slice of its ``answer`` (most are) as ``[start, end]`` in UTF-16 code
    units (as JavaScript slices strings), so the text is held once; ``judges`` each judge
    protocol's ``fields``, ``note`` and ``fills`` as ``[field, metric index, divisor]`` for the
    metrics of ``metrics`` it fills."""
    index = {(p, m): i for i, (p, m, _) in enumerate(metrics)}
    judged_outputs = judgements.get("outputs", {})
    by_key: dict[tuple[str, str, int], list[Score]] = defaultdict(list)
    for sc in scores:
        by_key[(sc.model or "", sc.sample_id, sc.k)].append(sc)
    out = []
    for s, pics in zip(samples, pictures, strict=True):
        runs = []
        for i, model in enumerate(models):
            p = shown.get((model, s.sample_id))
            k = p.k if p is not None else 0
            values: list[Any] = [None] * len(metrics)
            errors: list[str] = []
            notes: list[str] = []
            failed = p is None or p.status != "ok"
            for sc in by_key.get((model, s.sample_id, k), []):
                label = f"{sc.protocol}@{sc.protocol_version}"
                failed = failed or sc.status != "ok"
                for name, v in sc.metrics.items():
                    if (label, name) in index:
                        values[index[(label, name)]] = _json_number(v)
                if sc.error:
                    errors.append(f"{label}: {sc.error}")
                notes += [f"{label}: {n}" for n in sc.notes]
            pic = pics["outputs"].get(i, {"output": None, "diff": None})
            # A prediction's error is often repeated by every protocol's "missing" record.
            pred_error = None if p is None else p.error
            errors = [e for e in dict.fromkeys(errors) if not pred_error or pred_error not in e]
            notes = list(dict.fromkeys(notes))
            runs.append(
                {
                    "k": k,
                    "output": pic["output"],
                    "diff": pic["diff"],
                    "status": "none" if p is None else p.status,
                    "error": pred_error,
                    "error_short": short_error(pred_error or (errors[0] if errors else None)),
                    "text": text_answer(p, run_dir) if p is not None else None,
                    "v": values,
                    "score_error": "; ".join(errors) or None,
                    "notes": "; ".join(notes) or None,
                    "failed": failed,
                    "judge": judged_outputs.get((model, s.sample_id, k), []),
                }
            )
        out.append(
            {
                "id": s.sample_id,
                "task": s.task,
                "region": s.region,
                "modality": s.modality,
                "perspective": s.perspective.value,
                "instruction": s.instruction,
                "reference": reference_text(s),
                "description": s.description,
                "pics": {key: pics[key] for key in ("input", "roi", "target")},
                "runs": runs,
            }
        )
    blob = {"models": list(models), "metrics": [list(m) for m in metrics], "samples": out}
    return {**blob, **_judge_data(out, judgements, index)}


def browser_pages(blob: Mapping[str, Any], page_size: int = PAGE_SIZE) -> tuple[dict, list]:
    """Split the blob of :func:`sample_browser_data` into what ``index.html`` holds and the data
    files the page loads on demand (``file://`` pages cannot fetch, but can add a script).

    The head keeps ``models``, ``metrics``, ``judges`` and ``demo_pool``, and ``index``: per
    sample in the run's order its ``ids``, ``codes`` (its task, region and modality as
    indices into ``tasks``, ``regions`` and ``modalities``; ``null``: none), ``failed`` (the
    indices of the models that failed), ``values`` (per model its value per metric): what the
    filters and the "worst first" orders need, and ``order``: the samples' positions in the
    page's default order (worst first by the first metric over every model, failures last; by
    position when there is no metric). The samples' details go to pages of ``page_size`` in
    that order (``{"samples", "answers"}``: the judges' answers they link to), so the page
    opens on page 1, which the head holds as ``first``."""
    samples = blob["samples"]
    index = {"ids": [s["id"] for s in samples]}
    codes = []
    for field, vocab in (("task", "tasks"), ("region", "regions"), ("modality", "modalities")):
        names = sorted({s[field] for s in samples if s[field]})
        code = {name: i for i, name in enumerate(names)}
        index[vocab] = names
        codes.append([code.get(s[field]) for s in samples])
    index["codes"] = [list(c) for c in zip(*codes, strict=True)]
    index["failed"] = [[i for i, r in enumerate(s["runs"]) if r["failed"]] for s in samples]
    index["values"] = [[r["v"] for r in s["runs"]] for s in samples]
    order = default_order(samples, blob["metrics"])
    index["order"] = order
    all_answers = blob.get("answers", {})
    pages = []
    for start in range(0, len(order), page_size):
        chunk = [samples[i] for i in order[start : start + page_size]]
        pages.append(browser_page(chunk, all_answers))
    head = {k: v for k, v in blob.items() if k not in ("samples", "answers")}
    head.update(index=index, page_size=page_size, pages=len(pages))
    head["first"] = pages[0] if pages else {"samples": [], "answers": {}}
    return head, pages


def browser_page(chunk: Sequence[dict[str, Any]], answers: Mapping[str, Any]) -> dict[str, Any]:
    """A page of the browser: its samples and the judges' ``answers`` their outputs link to."""
    linked = [i for s in chunk for r in s["runs"] for g in r["judge"] for i in g["passes"]]
    return {"samples": list(chunk), "answers": {i: answers[i] for i in linked}}


def default_order(samples: Sequence[Mapping[str, Any]], metrics: Sequence[Sequence[Any]]) -> list:
    """The positions of ``samples`` in the browser's opening order: scored samples first, by
    the worst value of the first metric over the models (the lowest, or the highest for a
    lower-is-better metric), samples without it after them, failures last; ties by position
    (the order ``report.js`` sorts them in)."""

    def key(i: int) -> tuple:
        runs = samples[i]["runs"]
        failed = any(r["failed"] for r in runs)
        worst = None
        if metrics and not failed:
            lower = bool(metrics[0][2])
            for r in runs:
                v = _from_json(r["v"][0])
                if v is not None and (worst is None or (-v if lower else v) < worst):
                    worst = -v if lower else v
        return (failed, worst is None, worst or 0.0, i)

    return sorted(range(len(samples)), key=key)


def _from_json(v: float | str | None) -> float | None:
    """A value of the blob (:func:`_json_number`) as a number again."""
    return float(v) if isinstance(v, str) else v


def _judge_data(
    samples: Sequence[dict[str, Any]],
    judgements: Mapping[str, Any],
    index: Mapping[tuple[str, str], int],
) -> dict[str, Any]:
    """``judges`` (fills as metric indices) and the ``answers`` the shown outputs link to."""
    shown = [entry for s in samples for r in s["runs"] for entry in r["judge"]]
    all_answers = judgements.get("answers", {})
    answers = {i: _page_answer(all_answers[i]) for entry in shown for i in entry["passes"]}
    judges = {}
    for spec in dict.fromkeys(entry["judge"] for entry in shown):
        about = judgements["judges"][spec]
        fills = [
            [field, index[(protocol, metric)], divisor]
            for field, protocol, metric, divisor in about["fills"]
            if (protocol, metric) in index
        ]
        judges[spec] = {**about, "fills": fills}
    return {"judges": judges, "answers": answers}


def _page_answer(answer: Mapping[str, Any]) -> dict[str, Any]:
    """``answer`` with its rationale as ``[start, end]`` of its whole text when it is a slice
    of it (UTF-16 offsets: a character beyond U+FFFF counts two, as in JavaScript)."""
    why, whole = answer["rationale"], answer["answer"]
    at = whole.find(why) if why and whole else -1
    if at < 0:
        return dict(answer)
    start = _utf16_length(whole[:at])
    return {**answer, "rationale": [start, start + _utf16_length(why)]}


def _utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def attach_demonstrations(
    blob: dict[str, Any], shown_demos: Mapping[tuple[str, str, int], dict[str, Any]]
) -> int:
    """Add to each run of the browser blob the ids of the in-context demonstrations its shown
    prediction was given, in order (``demos``; ``[]`` for none). Returns how many runs had
    some."""
    models = blob["models"]
    count = 0
    for sample in blob["samples"]:
        for model, r in zip(models, sample["runs"], strict=True):
            row = shown_demos.get((model, sample["id"], r["k"]))
            r["demos"] = list(row["demo_ids"]) if row else []
            count += bool(r["demos"])
    return count


def short_error(text: str | None, limit: int = 90) -> str | None:
    """An error's class and first clause, for a one-line failure: ``"ValueError: unsupported
    instruction"`` from a message that goes on to list every supported one."""
    if not text:
        return None
    line = text.strip().splitlines()[0] if text.strip() else text
    head, sep, rest = line.partition(": ")
    if sep and (head.isidentifier() or head.endswith(("Error", "Exception"))) and " " not in head:
        clause = re.split(r": |; | \(|\. ", rest, maxsplit=1)[0]
        short = f"{head}: {clause}"
    else:
        short = re.split(r": |; | \(|\. ", line, maxsplit=1)[0]
    return short if len(short) <= limit else short[: limit - 1].rstrip() + "\u2026"


def text_answer(prediction: Prediction, run_dir: Path | None) -> str | None:
    """An answering model's text (its ``.txt`` output, or the ``.txt`` beside its image)."""
    if prediction.status != "ok" or not prediction.path:
        return None
    path = Path(prediction.path)
    if not path.is_absolute() and run_dir is not None:
        path = run_dir / path
    text_file = path if path.suffix.lower() == ".txt" else path.with_suffix(".txt")
    try:
        with open(text_file, encoding="utf-8", errors="replace") as fh:
            return fh.read(TEXT_LIMIT)
    except OSError:
        return None


def reference_text(sample: Sample) -> str | None:
    """The reference answer a text answer is compared with (``metadata.answer``, or MedGEN's
    ``metadata.expected``): a string, or a report's sections one per line, with the
    multiple-choice options when there are any."""
    md = sample.metadata
    given = md.get("expected")
    expected = given if isinstance(given, dict) else {}
    answer = md.get("answer") or expected.get("text") or expected.get("sections")
    if not answer:
        return None
    if isinstance(answer, dict):
        text = "\n".join(f"{k}: {v}" for k, v in answer.items())
    elif isinstance(answer, str):
        text = answer
    else:
        text = json.dumps(answer, ensure_ascii=False)
    choice = md.get("choice") or md.get("choices")
    if choice:
        text += f"\n(choices: {choice if isinstance(choice, str) else json.dumps(choice)})"
    return text[:TEXT_LIMIT]


def _json_number(v: float | None) -> float | str | None:
    if v is None or math.isnan(v):
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v
