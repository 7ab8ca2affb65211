"""Run an editing experiment: answer every probe before, edit, answer again, undo.

Single edits (``sequential=0``): each request is edited on the original model, its probes are
answered (stage ``immediate``) and the edit is undone. Sequential edits (``sequential=N``): the
requests, in the task set's order, are edited one after the other in runs of ``N`` without undo;
each request's probes are answered right after its own edit (``immediate``) and again after the
run's last edit (``final``); then the run's edits are undone, last first, and the next run
starts from the original model. Answers before any edit are computed once per distinct
(image, question) and shared.

An editor that does not converge is recorded with its last loss and its probes are scored as
they are; an edit that fails outright (:class:`EditError` or an error raised by the model) is
recorded with its error and the experiment goes on. A question the model fails to answer (an
HTTP 500 after the call layer's retries, say) is that question's failure: its line has no
answer, ``pre_error`` / ``post_error`` says why, and its correctness is ``null`` (missing,
never wrong); when a batch fails, its questions are asked one by one so one bad reply costs
only its own question. Only when no question at all can be answered before any edit (the
endpoint is down, the key is missing) does the run stop, with that error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medibench.calls._redact import redact
from medibench.io import read_image
from medibench.knowledge_edit._answerers import Answerer, AnswererError, TransformersAnswerer
from medibench.knowledge_edit._editors import EditCase, EditError, EditHandle, Editor
from medibench.knowledge_edit._matching import Match, exact_match, fuzzy_match
from medibench.knowledge_edit._results import ResultLine
from medibench.knowledge_edit._tasks import EditRequest, Probe, TaskError, TaskSet
from medibench.knowledge_edit._validate import set_problems

__all__ = ["EditRecord", "EditRunReport", "Matcher", "make_matchers", "run_edits"]


class Matcher:
    """Decides, for a batch of (probe, answer, image), whether each answer is right."""

    name = "matcher"

    def match_batch(self, items: Sequence[tuple[Probe, str, np.ndarray]]) -> list[Match]:
        raise NotImplementedError


class TextMatcher(Matcher):
    def __init__(self, name: str, fn: Callable[[str, str], Match]) -> None:
        self.name, self.fn = name, fn

    def match_batch(self, items: Sequence[tuple[Probe, str, np.ndarray]]) -> list[Match]:
        return [self.fn(answer, probe.answer) for probe, answer, _ in items]


class TokenAccuracyMatcher(Matcher):
    """Teacher-forced token accuracy on the gold answer (right: every token)."""

    name = "token_accuracy"

    def __init__(self, answerer: Answerer) -> None:
        if not isinstance(answerer, TransformersAnswerer):
            raise ValueError("the token_accuracy matcher needs a local transformers model "
                             f"(its logits), not {type(answerer).__name__}")  # fmt: skip
        self.answerer = answerer

    def match_batch(self, items: Sequence[tuple[Probe, str, np.ndarray]]) -> list[Match]:
        out = []
        for probe, _, image in items:
            acc = self.answerer.token_accuracy(image, probe.question, probe.answer)
            out.append(Match(acc == 1.0, acc))
        return out


def make_matchers(names: Sequence[str], answerer: Answerer, judge: Matcher | None = None,
                  ) -> list[Matcher]:  # fmt: skip
    """The matchers by name (``exact``, ``fuzzy``, ``token_accuracy``, ``judge``)."""
    out: list[Matcher] = []
    for n in names:
        if n == "exact":
            out.append(TextMatcher("exact", exact_match))
        elif n == "fuzzy":
            out.append(TextMatcher("fuzzy", fuzzy_match))
        elif n == "token_accuracy":
            out.append(TokenAccuracyMatcher(answerer))
        elif n == "judge":
            if judge is None:
                raise ValueError("the judge matcher needs a judge config (--judge FILE)")
            out.append(judge)
        else:
            raise ValueError(f"unknown matcher {n!r}; valid: exact, fuzzy, token_accuracy, judge")
    return out


@dataclass
class EditRecord:
    """How one edit went: converged or not, its last loss, steps, time, or its error."""

    edit_id: str
    order: int
    sequence: int
    converged: bool | None
    loss: float | None
    steps: int
    elapsed_s: float
    error: str | None = None


@dataclass
class EditRunReport:
    lines: list[ResultLine] = field(default_factory=list)
    edits: list[EditRecord] = field(default_factory=list)
    model_s: float = 0.0  # time inside the model: answering, editing, undoing, token accuracy
    total_s: float = 0.0


def run_edits(
    taskset: TaskSet,
    answerer: Answerer,
    editor: Editor,
    *,
    sequential: int = 0,
    matchers: Sequence[Matcher] | None = None,
    limit: int | None = None,
    model_name: str | None = None,
) -> EditRunReport:
    """Run ``editor`` over the task set's requests (the first ``limit``, in order)."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if sequential < 0:
        raise ValueError(f"sequential must be 0 (single edits) or more, got {sequential}")
    problems = set_problems(list(taskset.requests), str(taskset.root))
    if problems:
        raise TaskError("; ".join(problems))
    t_start = time.perf_counter()
    report = EditRunReport()
    matchers = list(matchers) if matchers is not None else make_matchers(["exact"], answerer)
    requests = list(taskset.requests[: limit if limit is not None else len(taskset.requests)])
    images = _Images(taskset)
    timer = _Timer(report)
    name = model_name or answerer.name
    probes = [p for r in requests for p in r.probes]
    pre = _answers(answerer, probes, images, matchers, timer, shared=True)
    _require_some_answer(pre)
    size = sequential if sequential > 0 else 1
    for seq, start in enumerate(range(0, len(requests), size)):
        group = requests[start : start + size]
        applied: list[tuple[EditRequest, EditHandle, EditRecord]] = []
        for request in group:
            record, handle = _edit(answerer, editor, request, images, timer, seq)
            report.edits.append(record)
            if handle is None:
                continue
            try:
                post = _answers(answerer, list(request.probes), images, matchers, timer)
            except AnswererError as exc:  # the edited model cannot answer: record, undo, go on
                record.error = f"{type(exc).__name__}: {exc}"
                post = None
            lines = [] if post is None else _lines(request, pre, post, matchers, "immediate",
                                                    record, editor, name)  # fmt: skip
            report.lines.extend(lines)
            if sequential > 0 and post is not None:
                applied.append((request, handle, record))
            else:
                timer.call(handle.undo)
        if sequential > 0:
            final_probes = [p for r, _, _ in applied for p in r.probes]
            final = _answers(answerer, final_probes, images, matchers, timer)
            for request, _, record in applied:
                report.lines.extend(
                    _lines(request, pre, final, matchers, "final", record, editor, name)
                )
            for _, handle, _ in reversed(applied):
                timer.call(handle.undo)
    report.total_s = time.perf_counter() - t_start
    return report


# -- helpers ----------------------------------------------------------------------------------


class _Images:
    def __init__(self, taskset: TaskSet) -> None:
        self.taskset, self.cache = taskset, {}  # type: ignore[var-annotated]

    def __call__(self, relative: str) -> np.ndarray:
        if relative not in self.cache:
            self.cache[relative] = read_image(self.taskset.image_path(relative), mode="rgb")
        return self.cache[relative]


class _Timer:
    def __init__(self, report: EditRunReport) -> None:
        self.report = report

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.report.model_s += time.perf_counter() - t0


Outcome = dict[str, tuple[str, Match]]  # matcher -> (answer, match)


def _answers(answerer, probes: Sequence[Probe], images, matchers, timer, *, shared=False,
             ) -> dict[str, dict[str, tuple[str, Match]]]:  # fmt: skip
    """``{probe_id: {matcher: (answer, match)}}``; ``shared``: one answer per distinct
    (image, question), the state of the model being the same for all."""
    keys = list(dict.fromkeys((p.image, p.question) for p in probes)) if shared else [
        (p.image, p.question) for p in probes]  # fmt: skip
    answers = _ask(answerer, [(images(i), q) for i, q in keys], timer)
    by_key = dict(zip(keys, answers, strict=True))
    out: dict[str, dict[str, tuple[str | AnswerFailure, Match]]] = {p.probe_id: {} for p in probes}
    for m in matchers:
        items = [(p, by_key[(p.image, p.question)], images(p.image)) for p in probes]
        good = [it for it in items if not isinstance(it[1], AnswerFailure)]
        call = timer.call if m.name == "token_accuracy" else (lambda f, *a: f(*a))
        matches = iter(call(m.match_batch, good) if good else [])
        for p, answer, _ in items:
            failed = isinstance(answer, AnswerFailure)
            out[p.probe_id][m.name] = (answer, _MISSING if failed else next(matches))
    return out


class AnswerFailure:
    """A question the model failed to answer, and why (one line)."""

    def __init__(self, error: str) -> None:
        self.error = error


_MISSING = Match(None, None)
#: What an answerer raises for a question it cannot answer (a remote error, a missing key).
_ANSWER_ERRORS = (AnswererError, RuntimeError, ValueError, OSError)


def _ask(answerer, items, timer) -> list[str | AnswerFailure]:
    """The answers to ``items``; when the batch fails, each question is asked alone, so a
    failure is recorded for its own question only."""
    try:
        return list(timer.call(answerer.answer_batch, items))
    except _ANSWER_ERRORS as exc:
        if len(items) <= 1:
            return [AnswerFailure(_why(exc))] * len(items)
    out: list[str | AnswerFailure] = []
    for item in items:
        try:
            out += list(timer.call(answerer.answer_batch, [item]))
        except _ANSWER_ERRORS as exc:
            out.append(AnswerFailure(_why(exc)))
    return out


def _why(exc: BaseException) -> str:
    return redact(" ".join(f"{type(exc).__name__}: {exc}".split()))


def _require_some_answer(pre: dict[str, dict[str, tuple[Any, Match]]]) -> None:
    """Stop the run when not one question could be answered before any edit."""
    answers = [a for by_matcher in pre.values() for a, _ in by_matcher.values()]
    if answers and all(isinstance(a, AnswerFailure) for a in answers):
        first = next(a for a in answers if isinstance(a, AnswerFailure))
        raise AnswererError(
            f"no question could be answered before any edit ({len(pre)} probes); the first "
            f"failure: {first.error}"
        )


def _edit(answerer, editor, request: EditRequest, images, timer, seq: int):
    case = EditCase(request.edit_id, images(request.image), request.question, request.target)
    t0 = time.perf_counter()
    try:
        handle = timer.call(editor.edit, answerer, case)
    except (EditError, AnswererError, RuntimeError, ValueError) as exc:
        record = EditRecord(request.edit_id, request.order, seq, None, None, 0,
                            time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")  # fmt: skip
        return record, None
    return EditRecord(request.edit_id, request.order, seq, handle.converged, handle.loss,
                      handle.steps, handle.elapsed_s), handle  # fmt: skip


def _lines(
    request, pre, post, matchers, stage, record: EditRecord, editor, model
) -> list[ResultLine]:
    out = []
    for p in request.probes:
        for m in matchers:
            pre_answer, pre_match = pre[p.probe_id][m.name]
            post_answer, post_match = post[p.probe_id][m.name]
            failures = {f"{when}_error": a.error for when, a in (("pre", pre_answer),
                        ("post", post_answer)) if isinstance(a, AnswerFailure)}  # fmt: skip
            out.append(ResultLine(
                request.edit_id, p.probe_id, p.kind, p.task_type, stage, pre_match.correct,
                post_match.correct, m.name,
                {"question": p.question, "gold": p.answer, "pre_answer": _text(pre_answer),
                 "post_answer": _text(post_answer), "pre_score": pre_match.score,
                 "post_score": post_match.score, "model": model, "editor": editor.name,
                 "converged": record.converged, "edit_loss": record.loss,
                 "sequence": record.sequence, "order": request.order, **failures},
            ))  # fmt: skip
    return out


def _text(answer: str | AnswerFailure) -> str | None:
    return None if isinstance(answer, AnswerFailure) else answer
