"""Text metrics: MedGEN-Bench's text tier as its evaluation code computes it.

Pure functions on strings (the model-based BERTScore and RadGraph F1 are plug-ins in
:mod:`medibench.metrics._text_models`, their weights from a local path):

* :func:`bleu`: sentence BLEU of whitespace tokens against one reference, 4-gram uniform
  weights, Chen & Cherry smoothing *method1* (an n-gram order with no match counts
  ``epsilon = 0.1`` matches): ``BP * exp(sum_n 1/4 log p_n)``, ``p_n = clipped matches / max(1,
  candidate n-grams)``, ``BP = 1`` if ``c > r`` else ``exp(1 - r/c)`` (0 for an empty candidate),
  0 when no unigram matches. Equal to NLTK's ``sentence_bleu(..., smoothing_function=
  SmoothingFunction().method1)``, which the official ``util/metrics.py`` calls.
* :func:`token_em_f1`: exact match and token F1. ``normalization="code"`` is the official
  ``compute_text_em_f1``: lower case, whitespace collapsed; tokens ``[a-z0-9]+('[a-z0-9]+)?``;
  F1 is 1 when both sides have no token. ``"squad"`` is the SQuAD script's: lower case,
  punctuation and the articles *a, an, the* removed, whitespace tokens.
* :func:`closed_form_answer` / :func:`task_accuracy`: the code's option normalisation
  (``"B"``, ``"b."``, ``"B) pneumonia"`` and ``"pneumonia"`` all read as option ``b. pneumonia``
  when it is among the choices), exact match for multiple choice and blank filling.
* :func:`entity_metrics`: precision, recall, F1, hallucination and omission rates and factual
  precision over the official clinical-entity regex list :data:`CLINICAL_ENTITIES` (version
  :data:`CLINICAL_ENTITIES_VERSION`).
* :data:`TEXT_PASS_THRESHOLDS` / :func:`passes`: the code's ``METRIC_THRESHOLDS`` for text.

Example:
    >>> round(bleu("the cat sat on the mat", "the cat sat on a mat"), 4)
    0.5373
    >>> token_em_f1("Right lower lobe pneumonia", "right lower lobe pneumonia.")
    (0.0, 1.0)
    >>> task_accuracy("multiple-choice", "B", "B. Pneumonia", ["A. Normal", "B. Pneumonia"])
    1.0
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from medibench._strings import text_of
from medibench.metrics._text_forms import (
    REPORT_SECTIONS,
    normalize_free_text,
    report_text,
    text_tokens,
)

# The model-based plug-ins live in their own module (they import torch only when built).
from medibench.metrics._text_models import BERTScore, RadGraphF1

__all__ = [
    "BERTScore",
    "CLINICAL_ENTITIES",
    "CLINICAL_ENTITIES_VERSION",
    "REPORT_SECTIONS",
    "RadGraphF1",
    "TEXT_PASS_THRESHOLDS",
    "EntityScores",
    "bleu",
    "choice_of",
    "clinical_entities",
    "closed_form_answer",
    "entity_metrics",
    "normalize_free_text",
    "passes",
    "report_text",
    "task_accuracy",
    "text_tokens",
    "token_em_f1",
]

#: Where :data:`CLINICAL_ENTITIES` comes from: the official list, by repository and commit.
CLINICAL_ENTITIES_VERSION = (
    "MedGEN-Bench-eval util/clinical_text_metrics.py ENTITY_PATTERNS "
    "@3450b8efd58684fd8de0266ac37565cfd639ce9e"
)
#: The official clinical-entity list: canonical entity -> the phrases that mention it (matched
#: on lower-cased text, not inside a longer word: no letter may touch either end).
CLINICAL_ENTITIES: Mapping[str, tuple[str, ...]] = {
    "lungs": ("lung", "lungs", "pulmonary"),
    "heart": ("heart", "cardiac", "cardiomediastinal silhouette"),
    "mediastinum": ("mediastinum", "mediastinal contour", "cardiomediastinal silhouette"),
    "pleura": ("pleura", "pleural"),
    "pleural effusion": ("pleural effusion", "effusion"),
    "pneumothorax": ("pneumothorax",),
    "atelectasis": ("atelectasis",),
    "consolidation": ("consolidation",),
    "opacity": ("opacity", "opacification", "opacities"),
    "edema": ("edema",),
    "mass": ("mass",),
    "nodule": ("nodule", "nodules"),
    "lesion": ("lesion", "lesions"),
    "cyst": ("cyst", "cysts"),
    "fracture": ("fracture", "fractures"),
    "pancreas": ("pancreas", "pancreatic"),
    "parathyroid": ("parathyroid",),
    "thyroid": ("thyroid",),
    "kidney": ("kidney", "kidneys", "renal"),
    "diaphragm": ("diaphragm", "hemidiaphragm"),
    "endotracheal tube": ("endotracheal tube",),
    "enteric tube": ("enteric tube",),
    "chest tube": ("chest tube",),
    "catheter": ("catheter",),
    "radiograph": ("radiograph", "x-ray", "xray"),
    "ct": ("ct", "computed tomography"),
    "mri": ("mri", "magnetic resonance imaging"),
    "ultrasound": ("ultrasound", "doppler", "sonography"),
}
#: The code's text pass thresholds: metric -> (threshold, lower_is_better).
TEXT_PASS_THRESHOLDS: Mapping[str, tuple[float, bool]] = {
    "bleu": (0.09, False),
    "bertscore": (0.9, False),
    "entity_hallucination_rate": (0.1, True),
    "entity_omission_rate": (0.1, True),
    "entity_factual_precision": (0.9, False),
}

_OPTION = re.compile(r"^\s*([A-Z])[\.)\]:-]\s*(.*)$")
_LETTER = re.compile(r"^\s*([A-Z])\s*$")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
_ENTITY_RES = {
    name: [re.compile(r"(?<![a-z])" + re.escape(p) + r"(?![a-z])") for p in phrases]
    for name, phrases in CLINICAL_ENTITIES.items()
}


def bleu(candidate: str, reference: str, *, max_order: int = 4, epsilon: float = 0.1) -> float:
    """Sentence BLEU of ``candidate`` against ``reference`` (whitespace tokens, uniform weights
    over 1..``max_order``-grams, smoothing method1 with ``epsilon``); see the module docstring."""
    if max_order < 1 or epsilon <= 0:
        raise ValueError("max_order >= 1 and epsilon > 0 are required")
    hyp, ref = candidate.split(), reference.split()
    precisions = []
    for n in range(1, max_order + 1):
        hyp_counts = _ngrams(hyp, n)
        ref_counts = _ngrams(ref, n)
        matches = sum(min(c, ref_counts[g]) for g, c in hyp_counts.items())
        total = max(1, sum(hyp_counts.values()))
        if n == 1 and matches == 0:
            return 0.0
        precisions.append((matches if matches else epsilon) / total)
    c, r = len(hyp), len(ref)
    bp = 1.0 if c > r else math.exp(1 - r / c)
    return bp * math.exp(math.fsum(math.log(p) / max_order for p in precisions))


def token_em_f1(
    response: object, answer: object, *, normalization: Literal["code", "squad"] = "code"
) -> tuple[float, float]:
    """``(exact match, token F1)`` of ``response`` against ``answer`` (module docstring)."""
    if normalization == "code":
        em = float(normalize_free_text(response) == normalize_free_text(answer))
        got, want = text_tokens(response), text_tokens(answer)
        if not got and not want:
            return em, 1.0
    elif normalization == "squad":
        got, want = _squad(response).split(), _squad(answer).split()
        em = float(got == want)
        if not got or not want:
            return em, float(got == want)
    else:
        raise ValueError(f"normalization must be 'code' or 'squad', not {normalization!r}")
    overlap = sum((Counter(got) & Counter(want)).values())
    if overlap == 0:
        return em, 0.0
    precision, recall = overlap / len(got), overlap / len(want)
    return em, 2 * precision * recall / (precision + recall)


def closed_form_answer(text: object, choices: Iterable[str] | None = None) -> str:
    """The code's canonical form of a closed-form answer: ``"b"`` for a bare letter,
    ``"b. body"`` for a lettered option, the free-text form otherwise; mapped to the matching
    choice's canonical form (by letter, ``"b."``, body or the whole option) when ``choices``
    hold one."""
    value = _choice_value(text_of(text))
    return _choice_map(choices).get(value, value)


def choice_of(text: object, choices: Sequence[str]) -> str | None:
    """The canonical form of the choice ``text`` names, or ``None`` when it names none."""
    mapping = _choice_map(choices)
    return mapping.get(_choice_value(text_of(text)))


def task_accuracy(
    task: str, response: object, answer: object, choices: Iterable[str] | None = None
) -> float | None:
    """1.0 / 0.0 for ``multiple-choice`` (option-normalised) and ``blank-filling`` (free-text
    normalised) answers; ``None`` for other tasks (the code has no accuracy for them)."""
    if task == "multiple-choice":
        options = list(choices or [])
        return float(closed_form_answer(response, options) == closed_form_answer(answer, options))
    if task == "blank-filling":
        return float(normalize_free_text(response) == normalize_free_text(answer))
    return None


def clinical_entities(text: object) -> set[str]:
    """The canonical entities of :data:`CLINICAL_ENTITIES` that ``text`` mentions."""
    norm = normalize_free_text(text).replace("\n", " ")
    return {name for name, res in _ENTITY_RES.items() if any(r.search(norm) for r in res)}


@dataclass(frozen=True)
class EntityScores:
    """Clinical-entity agreement of a response with its reference (the code's definitions).

    Both sides without entities: precision = recall = F1 = factual precision = 1, rates 0.
    One side without entities: precision = recall = F1 = 0; a rate whose denominator is empty
    is 0 and factual precision is 0 (as the code does).
    """

    precision: float
    recall: float
    f1: float
    hallucination_rate: float
    omission_rate: float
    factual_precision: float
    response_entities: tuple[str, ...] = field(default=())
    reference_entities: tuple[str, ...] = field(default=())
    hallucinated: tuple[str, ...] = field(default=())
    omitted: tuple[str, ...] = field(default=())


def entity_metrics(response: object, reference: object) -> EntityScores:
    """Entity precision/recall/F1 and hallucination/omission rates (:class:`EntityScores`)."""
    got, want = clinical_entities(response), clinical_entities(reference)
    both = len(got & want)
    if not got and not want:
        p = r = f1 = 1.0
    elif not got or not want:
        p = r = f1 = 0.0
    else:
        p, r = both / len(got), both / len(want)
        f1 = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    return EntityScores(
        precision=p,
        recall=r,
        f1=f1,
        hallucination_rate=len(got - want) / len(got) if got else 0.0,
        omission_rate=len(want - got) / len(want) if want else 0.0,
        factual_precision=both / len(got) if got else float(not want),
        response_entities=tuple(sorted(got)),
        reference_entities=tuple(sorted(want)),
        hallucinated=tuple(sorted(got - want)),
        omitted=tuple(sorted(want - got)),
    )


def passes(metric: str, value: float, thresholds: Mapping[str, tuple[float, bool]] | None = None):
    """1.0 when ``value`` passes ``metric``'s threshold (at least it; at most it for a
    lower-is-better metric), else 0.0. ``KeyError`` naming the known metrics otherwise."""
    table = TEXT_PASS_THRESHOLDS if thresholds is None else thresholds
    if metric not in table:
        raise KeyError(f"no pass threshold for {metric!r}; known: {', '.join(table)}")
    threshold, lower = table[metric]
    return float(value <= threshold if lower else value >= threshold)


# -- helpers ----------------------------------------------------------------------------------
def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _squad(text: object) -> str:
    lowered = text_of(text).lower()
    no_punct = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", no_punct).split())


def _choice_value(text: str) -> str:
    norm = normalize_free_text(text)
    letter = _LETTER.match(norm.upper())
    if letter:
        return letter.group(1).lower()
    option = _OPTION.match(norm.upper())
    if option:
        body = normalize_free_text(option.group(2))
        return f"{option.group(1).lower()}. {body}" if body else option.group(1).lower()
    return norm


def _choice_map(choices: Iterable[str] | None) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for raw in choices or []:
        canonical = _choice_value(raw)
        mapping[canonical] = canonical
        option = _OPTION.match(normalize_free_text(raw).upper())
        if option:
            letter, body = option.group(1).lower(), normalize_free_text(option.group(2))
            mapping[letter] = mapping[f"{letter}."] = canonical
            if body:
                mapping[body] = canonical
    return mapping
