"""Edit requests from medical VQA rows: the edit, and its T0-T4 probes.

For each chosen row (the edit: teach its gold answer to its question on its image):

* T0 reliability: the row itself. T0 locality: unrelated questions on other images.
* T1 image variation (generality): the same question with the same answer on another image of
  the same modality.
* T2 text variation (generality): the dataset's own rephrasings of the question (VQA-RAD's
  ``para`` questions); a row with none gets a fixed template rephrasing, marked
  ``"rephrase": "template"`` in its metadata.
* T3 modality / protocol shift: the same question on an image of another modality (VQA-RAD:
  another organ region); the same answer makes it a generality probe, another a locality one.
* T4 knowledge composition: the other questions about the same image; one whose answer is the
  target is a generality probe (G), the others locality probes (L).

T5 (temporal progression) needs follow-up images, which SLAKE and VQA-RAD do not have: only the
synthetic task set (:mod:`medibench.knowledge_edit._synthetic`) builds it. Every choice is drawn
from a generator seeded by the row's identity, so the same rows give the same task set.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from medibench.knowledge_edit._tasks import EditRequest, Probe, ProbeKind, TaskError, TaskType
from medibench.synth import item_rng

__all__ = ["TEXT_TEMPLATES", "VQARow", "build_requests", "order_requests"]

#: Rephrasings used when a dataset has none for a question (marked as templates).
TEXT_TEMPLATES = ("Looking at this image: {question}", "{question} Answer briefly.")


@dataclass(frozen=True)
class VQARow:
    """One medical VQA question as read from SLAKE or VQA-RAD.

    ``image`` is the stored image's path relative to the task set folder; ``where`` says where
    the row came from (file and row) for errors; ``modality`` is the imaging modality (SLAKE) or
    the organ region (VQA-RAD, which records no modality); ``rephrases`` are the dataset's own
    rephrasings of the question.
    """

    source: str
    qid: str
    image: str
    question: str
    answer: str
    where: str
    modality: str = ""
    organ: str = ""
    language: str = "en"
    answer_type: str = ""
    content_type: str = ""
    rephrases: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)


def normalise_question(text: str) -> str:
    """Lower case, single spaces, no trailing punctuation: rows asking the same thing match."""
    return re.sub(r"\s+", " ", text.strip().lower()).rstrip(" ?.!")


def build_requests(
    rows: Sequence[VQARow],
    *,
    seed: int = 0,
    limit: int | None = None,
    per_type: int = 2,
    n_unrelated: int = 2,
) -> list[EditRequest]:
    """Edit requests for ``rows`` (``limit`` of them at most), in the sequential order.

    Args:
        rows: the questions (every one is a possible probe; ``limit`` of them become edits).
        seed: seeds the sequential order and every probe choice.
        limit: how many edits (``None``: one per row).
        per_type: at most this many probes per task type and kind.
        n_unrelated: T0 locality probes (questions on other images) per edit.

    Raises:
        TaskError: an empty gold answer or question (naming the row), duplicate ids.
    """
    for r in rows:
        if not r.answer.strip():
            raise TaskError(
                f"{r.where}: question {r.qid} ({r.question!r}) has an empty gold answer"
            )
        if not r.question.strip():
            raise TaskError(f"{r.where}: question {r.qid} is empty")
    ids = defaultdict(list)
    for r in rows:
        ids[f"{r.source}-{r.qid}"].append(r.where)
    dup = {k: v for k, v in ids.items() if len(v) > 1}
    if dup:
        k, v = next(iter(dup.items()))
        raise TaskError(f"duplicate question id {k} at {', '.join(v[:3])}")
    by_question: dict[str, list[VQARow]] = defaultdict(list)
    by_image: dict[str, list[VQARow]] = defaultdict(list)
    for r in rows:
        by_question[normalise_question(r.question)].append(r)
        by_image[r.image].append(r)
    chosen = order_requests(list(rows), seed=seed)[: len(rows) if limit is None else limit]
    out = []
    for order, row in enumerate(chosen):
        rng = item_rng("edit-probes", seed, row.source, row.qid)
        probes = _probes(row, rows, by_question, by_image, rng, per_type, n_unrelated)
        out.append(
            EditRequest(
                edit_id=f"{row.source}-{row.qid}",
                image=row.image,
                question=row.question,
                target=row.answer,
                source=row.source,
                order=order,
                probes=tuple(probes),
                metadata={
                    "where": row.where,
                    "modality": row.modality,
                    "organ": row.organ,
                    "language": row.language,
                    "answer_type": row.answer_type,
                    "content_type": row.content_type,
                    **row.extra,
                },
            )  # fmt: skip
        )
    return out


def order_requests(rows: list[VQARow], *, seed: int) -> list[VQARow]:
    """The sequential order: rows sorted by id, then permuted by a generator seeded from
    ``seed`` (the same rows and seed always give the same order)."""
    rows = sorted(rows, key=lambda r: (r.source, r.qid))
    perm = item_rng("edit-order", seed).permutation(len(rows))
    return [rows[int(i)] for i in perm]


def _probes(row, rows, by_question, by_image, rng, per_type: int, n_unrelated: int) -> list[Probe]:
    eid = f"{row.source}-{row.qid}"
    probes: list[Probe] = []
    counts: dict[tuple[str, str], int] = defaultdict(int)

    def add(kind: ProbeKind, tt: TaskType, other: VQARow | None, question: str, answer: str,
            **meta) -> None:  # fmt: skip
        key = (tt, kind)
        if counts[key] >= per_type and tt != "T0":
            return
        i = counts[key]
        counts[key] += 1
        image = row.image if other is None else other.image
        if other is not None:
            meta = {"qid": other.qid, **meta}
        probes.append(Probe(f"{eid}/{tt}-{kind}-{i}", kind, tt, image, question, answer, meta))

    add("reliability", "T0", None, row.question, row.answer, qid=row.qid)
    target = normalise_question(row.answer)
    same_q = [r for r in by_question[normalise_question(row.question)] if r is not row]
    # T1: another image, same modality, same question and answer
    for r in _pick(rng, [r for r in same_q if r.image != row.image and r.modality == row.modality
                         and normalise_question(r.answer) == target], per_type):  # fmt: skip
        add("generality", "T1", r, r.question, r.answer)
    # T2: the dataset's rephrasings, else the templates
    rephrases = [
        q for q in row.rephrases if normalise_question(q) != normalise_question(row.question)
    ]
    for q in rephrases[:per_type]:
        add("generality", "T2", None, q, row.answer, rephrase="dataset")
    if not rephrases:
        for t in TEXT_TEMPLATES[:per_type]:
            add("generality", "T2", None, t.format(question=row.question), row.answer,
                rephrase="template")  # fmt: skip
    # T3: the same question on another modality (or organ region)
    shifted = [r for r in same_q if r.modality != row.modality and r.image != row.image]
    for r in _pick(rng, [r for r in shifted if normalise_question(r.answer) == target], per_type):
        add("generality", "T3", r, r.question, r.answer, modality=r.modality)
    for r in _pick(rng, [r for r in shifted if normalise_question(r.answer) != target], per_type):
        add("locality", "T3", r, r.question, r.answer, modality=r.modality)
    # T4: the other questions about the same image
    others = [r for r in by_image[row.image] if r is not row
              and normalise_question(r.question) != normalise_question(row.question)]  # fmt: skip
    for r in _pick(rng, [r for r in others if normalise_question(r.answer) == target], per_type):
        add("generality", "T4", r, r.question, r.answer, variant="G")
    for r in _pick(rng, [r for r in others if normalise_question(r.answer) != target], per_type):
        add("locality", "T4", r, r.question, r.answer, variant="L")
    # T0 locality: unrelated questions on other images
    pool = [i for i in rng.permutation(len(rows))[: 8 * n_unrelated + 8]]
    unrelated = [
        rows[int(i)]
        for i in pool
        if rows[int(i)].image != row.image
        and normalise_question(rows[int(i)].question) != normalise_question(row.question)
    ]
    for r in unrelated[:n_unrelated]:
        add("locality", "T0", r, r.question, r.answer)
    return probes


def _pick(rng, candidates: list[VQARow], n: int) -> list[VQARow]:
    if len(candidates) <= n:
        return candidates
    return [candidates[int(i)] for i in sorted(rng.choice(len(candidates), n, replace=False))]
