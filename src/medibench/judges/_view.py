"""The judge's answers per output, as the report's sample browser shows them.

:func:`sample_judgements` reads what ``medibench judge`` stored in a run (``judgement_links``
joined with ``judgements``, read only) and gives, per judged output, each judge protocol and
judge model that judged it with its passes in order; per answer its status, scores, problems,
prompt file and version, the full answer and the rationale in it (:func:`rationale`); per judge
protocol the scores it asks for and the metrics they fill.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from medibench.judges._parsing import rationale
from medibench.judges._protocols import JUDGES, JudgeProtocol
from medibench.judges._records import Judgement, linked_judgements
from medibench.registry import UnknownNameError

__all__ = ["ANSWER_ID_LENGTH", "sample_judgements"]

#: Hex digits of a judgement's key that name its answer in the browser data (the score rows'
#: reasons name a judgement by its first 12).
ANSWER_ID_LENGTH = 16


def sample_judgements(db: sqlite3.Connection) -> dict[str, Any]:
    """What the judges said about each output of the run whose ``run.sqlite`` is ``db``.

    Returns ``{"outputs", "judges", "answers"}``:

    * ``outputs``: ``{(model, sample_id, k): [{"judge", "judge_model", "endpoint", "passes"}]}``,
      one entry per judge protocol (``name@version``), judge model and endpoint, ``passes``
      the ids of its answers in pass order;
    * ``answers``: ``{id: {"pass", "status", "prompt_file", "prompt_version", "scores",
      "problems", "rationale", "answer"}}``; ``answer`` is the judge's whole answer (``None``
      when none came: an ``error``), ``rationale`` what it says besides its scores (``""``:
      nothing but scores; ``None``: no answer, or a judge protocol not registered here);
    * ``judges``: ``{spec: {"description", "fields", "fills", "note"}}``: ``fields`` are
      ``[key, label, highest score, kind]`` in the prompt's order, ``fills`` ``[field, scoring
      protocol, metric, divisor]`` (the metric holds the mean over the ``ok`` passes of the
      field's score divided by the divisor); a judge protocol that is not registered here
      has its scores' keys as fields, no fills and a ``note`` that says so.

    ``{"outputs": {}, "judges": {}, "answers": {}}`` for a run never judged.
    """
    passes: dict[tuple[str, str, int], dict[tuple[str, str, str], list[str]]] = {}
    protocols: dict[str, JudgeProtocol | None] = {}
    score_keys: dict[str, set[str]] = {}
    answers: dict[str, dict[str, Any]] = {}
    for model, sid, k, j in linked_judgements(db):  # in pass order
        if j.judge not in protocols:
            protocols[j.judge] = _registered(j.judge)
        answer_id = j.key[:ANSWER_ID_LENGTH]
        if answer_id not in answers:
            answers[answer_id] = _answer(j, protocols[j.judge])
        score_keys.setdefault(j.judge, set()).update(j.scores)
        by_judge = passes.setdefault((model, sid, k), {})
        by_judge.setdefault((j.judge, j.judge_model, j.endpoint), []).append(answer_id)
    outputs = {
        output: [
            {"judge": judge, "judge_model": judge_model, "endpoint": endpoint, "passes": ids}
            for (judge, judge_model, endpoint), ids in by_judge.items()
        ]
        for output, by_judge in passes.items()
    }
    judges = {spec: _describe(spec, proto, score_keys[spec]) for spec, proto in protocols.items()}
    return {"outputs": outputs, "judges": judges, "answers": answers}


def _registered(spec: str) -> JudgeProtocol | None:
    try:
        return JUDGES.create(spec)
    except UnknownNameError:
        return None


def _answer(j: Judgement, proto: JudgeProtocol | None) -> dict[str, Any]:
    return {
        "pass": j.pass_index,
        "status": j.status,
        "prompt_file": j.prompt_file,
        "prompt_version": j.prompt_version,
        "scores": j.scores,
        "problems": j.problems,
        "rationale": None if j.raw is None or proto is None else rationale(j.raw, proto.fields),
        "answer": j.raw,
    }


def _describe(spec: str, proto: JudgeProtocol | None, keys: set[str]) -> dict[str, Any]:
    if proto is None:
        return {
            "description": "",
            "fields": [[key, key, None, "number"] for key in sorted(keys)],
            "fills": [],
            "note": (
                f"judge protocol '{spec}' is not registered in this medibench: its scores are "
                "shown by their keys, the metrics they fill are not known and the answer is "
                "shown whole (no rationale separated)"
            ),
        }
    return {
        "description": proto.description,
        "fields": [[f.key, f.label, f.hi, f.kind] for f in proto.fields],
        "fills": [[f.field, f.protocol, f.metric, f.divide_by] for f in proto.fills],
        "note": None,
    }
