"""``medgen@code``'s text tier: a VQA or generation answer scored as the official ``eval.py``
(``compute_text_metric_bundle`` and its BLEU / BERTScore batches) scores it.

The texts compared (the code's ``canonical_*_text``): for ``multiple-choice`` and
``blank-filling``, the option-normalised forms (:func:`~medibench.metrics.text.closed_form_answer`
with the record's choices); otherwise the answer with whitespace collapsed, and a sectioned
reference serialised by :func:`~medibench.metrics.text.report_text`. On them:

========================================  ===============================================
metric                                    definition (:mod:`medibench.metrics.text`)
========================================  ===============================================
``bleu``, ``bleu_pass``                   NLTK sentence BLEU, method1; pass at >= 0.09
``bertscore``, ``bertscore_pass``         BERTScore F1 (PubMedBERT layer 12); pass >= 0.9
``task_accuracy``                         multiple choice / blank filling only
``text_em``, ``text_f1``                  the code's normalisation
``entity_precision/recall/f1``            the official 28-entity list
``entity_hallucination_rate`` (+_pass)    pass at <= 0.1
``entity_omission_rate`` (+_pass)         pass at <= 0.1
``entity_factual_precision`` (+_pass)     pass at >= 0.9
``radgraph_f1``                           RG_ER; skipped under 4 tokens
========================================  ===============================================

BERTScore and RadGraph need their models: the folders named by the environment variables
:data:`BERTSCORE_ENV` and :data:`RADGRAPH_ENV`. Unset, the metric is ``None`` with that reason;
set to a folder that is not there, ``None`` with the error naming the missing file. A metric
that cannot be computed is ``None`` with its reason (the code aborts the run, or fills 0).

The edges, by protocol (``edges`` of :func:`score_text`):

=====================================  =========================  ============================
input                                  ``medgen@code`` (``code``)  ``medgen@1`` (``medibench``)
=====================================  =========================  ============================
empty, whitespace or ``null`` response scored as ``""`` (BLEU 0,  a failed prediction: the
                                       EM 0, entity P/R/F1 1 when record is ``missing`` with
                                       neither side names one)    :data:`EMPTY_ANSWER`
report answer stored as a JSON string  compared as that raw       parsed: its sections
                                       string                     serialised
multiple-choice response naming no     ``compute_task_accuracy``  wrong (0) and noted
choice                                 (``B`` = ``B`` is right)
integer answer                         its ``str()``              its ``str()``
empty (or ``null``) answer             scored against ``""``      ``None``: no reference text
=====================================  =========================  ============================
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from medibench._strings import text_of
from medibench.metrics.text import (
    BERTScore,
    RadGraphF1,
    bleu,
    choice_of,
    closed_form_answer,
    entity_metrics,
    passes,
    report_text,
    task_accuracy,
    token_em_f1,
)
from medibench.protocols import ProtocolResult
from medibench.samples import Sample

__all__ = [
    "BERTSCORE_ENV",
    "EMPTY_ANSWER",
    "RADGRAPH_ENV",
    "TEXT_METRICS",
    "Answer",
    "read_answer",
    "reference_text",
    "response_text",
    "score_text",
]

#: Environment variables naming the local BERTScore (PubMedBERT) and RadGraph model folders.
BERTSCORE_ENV = "MEDIBENCH_BERTSCORE_MODEL"
RADGRAPH_ENV = "MEDIBENCH_RADGRAPH_MODEL"
_CLOSED = ("multiple-choice", "blank-filling")
EMPTY_ANSWER = "the model's answer is empty (a failed prediction, not a wrong answer)"
#: The text tier's metrics, in order.
TEXT_METRICS = (
    "bleu",
    "bleu_pass",
    "bertscore",
    "bertscore_pass",
    "task_accuracy",
    "text_em",
    "text_f1",
    "entity_precision",
    "entity_recall",
    "entity_f1",
    "entity_hallucination_rate",
    "entity_hallucination_pass",
    "entity_omission_rate",
    "entity_omission_pass",
    "entity_factual_precision",
    "entity_factual_precision_pass",
    "radgraph_f1",
)


@dataclass(frozen=True)
class Answer:
    """A text prediction, with its image when the model made one (``None`` otherwise)."""

    text: str
    image: np.ndarray | None = None
    image_path: Path | None = None


def read_answer(path: str | os.PathLike, read_image: Callable[[Path], np.ndarray]) -> Answer:
    """The answer stored at ``path``: a ``.txt`` file (and the ``.png`` beside it, if any), or
    a ``.png`` with its ``.txt`` beside it. ``FileNotFoundError`` naming the text file."""
    p = Path(path)
    text_file = p.with_suffix(".txt")
    if not text_file.is_file():
        raise FileNotFoundError(f"text prediction {text_file} does not exist")
    png = p.with_suffix(".png")
    image = read_image(png) if png.is_file() else None
    return Answer(text_file.read_text(encoding="utf-8"), image, png if image is not None else None)


def response_text(sample: Sample, response: str) -> str:
    """The response as the code compares it (module docstring)."""
    response = text_of(response)
    if sample.task in _CLOSED:
        return closed_form_answer(response, sample.metadata.get("choices") or [])
    return " ".join(response.split())


def reference_text(sample: Sample, edges: Literal["code", "medibench"] = "medibench") -> str:
    """The reference answer as compared (module docstring): under ``"code"`` the record's raw
    ``answer`` as the code's ``canonical_answer_text`` turns it into text (a JSON string stays
    a string); under ``"medibench"`` the parsed reference."""
    expected = sample.metadata.get("expected") or {}
    if edges == "code" and "raw" in expected:
        raw = expected["raw"]
        if isinstance(raw, dict):
            return report_text(raw)
        if sample.task in _CLOSED:
            return closed_form_answer(raw, sample.metadata.get("choices") or [])
        return " ".join(str(raw or "").split())
    text = text_of(expected.get("text"))
    if sample.task in _CLOSED and not expected.get("sections"):
        return closed_form_answer(text, sample.metadata.get("choices") or [])
    return text if expected.get("sections") else " ".join(text.split())


def score_text(
    sample: Sample,
    response: str | None,
    res: ProtocolResult,
    edges: Literal["code", "medibench"] = "medibench",
) -> None:
    """Fill the text tier's metrics of ``sample``'s answer ``response`` into ``res``, the edges
    as ``edges`` says (module docstring)."""
    expected = sample.metadata.get("expected") or {}
    response = text_of(response)
    code = edges == "code"
    if not code and not response.strip():
        res.fail(EMPTY_ANSWER)
        return
    if not expected.get("text") and not (code and "raw" in expected):
        res.missing(TEXT_METRICS, "the sample has no reference text")
        return
    hyp, ref = response_text(sample, response), reference_text(sample, edges)
    value = bleu(hyp, ref)
    res.metrics.update(bleu=value, bleu_pass=passes("bleu", value))
    choices = sample.metadata.get("choices") or []
    answer = expected.get("raw") if code and "raw" in expected else expected.get("text")
    accuracy = task_accuracy(sample.task, response, answer, choices)
    named = choice_of(response, choices) is not None
    if not code and sample.task == "multiple-choice" and choices and not named:
        accuracy = 0.0
        res.notes.append(f"the answer {response.strip()[:80]!r} is not among the choices: wrong")
    if accuracy is None:
        res.missing("task_accuracy", f"the code has no task accuracy for '{sample.task}'")
    else:
        res.metrics["task_accuracy"] = accuracy
    res.metrics["text_em"], res.metrics["text_f1"] = token_em_f1(hyp, ref)
    ent = entity_metrics(hyp, ref)
    res.metrics.update(
        entity_precision=ent.precision,
        entity_recall=ent.recall,
        entity_f1=ent.f1,
        entity_hallucination_rate=ent.hallucination_rate,
        entity_hallucination_pass=passes("entity_hallucination_rate", ent.hallucination_rate),
        entity_omission_rate=ent.omission_rate,
        entity_omission_pass=passes("entity_omission_rate", ent.omission_rate),
        entity_factual_precision=ent.factual_precision,
        entity_factual_precision_pass=passes("entity_factual_precision", ent.factual_precision),
    )
    _model_metric(res, "bertscore", BERTSCORE_ENV, lambda m: m(hyp, ref), _bertscore)
    score = res.metrics.get("bertscore")
    if score is not None:
        res.metrics["bertscore_pass"] = passes("bertscore", score)
    else:
        res.missing("bertscore_pass", "no BERTScore")
    _model_metric(res, "radgraph_f1", RADGRAPH_ENV, lambda m: m(hyp, ref), _radgraph)


# -- helpers ----------------------------------------------------------------------------------
def _model_metric(
    res: ProtocolResult,
    name: str,
    env: str,
    compute: Callable[[Any], Any],
    load: Callable[[str], Any],
) -> None:
    folder = os.environ.get(env, "").strip()
    if not folder:
        res.missing(name, f"set {env} to the local model folder to compute it")
        return
    try:
        out = compute(load(folder))
    except (FileNotFoundError, ImportError, ValueError) as exc:
        res.missing(name, str(exc))
        return
    value, why = out if isinstance(out, tuple) else (out, None)
    if value is None:
        res.missing(name, why or "not computed")
    else:
        res.metrics[name] = float(value)


@lru_cache(maxsize=2)
def _bertscore(folder: str) -> BERTScore:
    return BERTScore(folder, num_layers=12)


@lru_cache(maxsize=2)
def _radgraph(folder: str) -> RadGraphF1:
    return RadGraphF1(folder)
