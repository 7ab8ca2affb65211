"""Planning a judge's calls over a run: what to judge, each call's cache key, what is cached.

Every (model, sample, k) with an ``ok`` score row under a scoring protocol the judge fills gets one
call per pass; its cache key comes from file hashes and texts only (no image is decoded for a cache
hit). :class:`JudgeReport` starts here and is completed by the calling and filling steps.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from medibench.io import sha256_file
from medibench.judges._config import JudgeConfig
from medibench.judges._protocols import JudgeProtocol
from medibench.judges._records import Judgement, JudgementStore, cache_key

__all__ = ["JudgeReport"]


@dataclass
class JudgeReport:
    """What one judge protocol did to a run.

    Attributes:
        judge, judge_model: the judge protocol spec and the judge model id.
        items: predictions the judge applies to; ``skipped``: reason -> predictions it does not.
        planned: calls the run needed (after the cache); ``cached``: keys answered from it.
        counts: status -> new judgements stored this time (``ok``, ``refused``,
            ``unparsable``, ``error``).
        failures: failure kind (``HTTP 503``, ``HTTP 200, body not JSON``, ``timeout``, ...) ->
            calls of this run that got no answer (stored as ``error``; a re-run asks again).
        not_started: planned calls not made because the budget was reached.
        requests: HTTP attempts made (retries included).
        cost_usd: cost of this run's calls (``None`` when the config has no prices);
            ``estimated_cost_usd``: the estimate of the planned calls.
        spent_before_usd, spent_after_usd: the run folder's judge spend (every invocation)
            before and after this run; ``max_cost``: the folder's budget, if one was given.
        filled: score rows updated; ``missing``: metric -> rows left ``None`` by a failure.
        spread: score field -> mean over predictions of the standard deviation across passes.
    """

    judge: str
    judge_model: str
    items: int = 0
    skipped: Counter = field(default_factory=Counter)
    planned: int = 0
    cached: int = 0
    counts: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    not_started: int = 0
    requests: int = 0
    cost_usd: float | None = None
    estimated_cost_usd: float | None = None
    spent_before_usd: float = 0.0
    spent_after_usd: float = 0.0
    max_cost: float | None = None
    stopped_by_budget: bool = False
    dry_run: bool = False
    filled: int = 0
    missing: Counter = field(default_factory=Counter)
    spread: dict[str, float] = field(default_factory=dict)


@dataclass
class _Call:
    key: str
    material: dict
    pass_index: int
    seed: int | None
    sample: object
    paths: list[Path]
    links: list[tuple[str, str, int]]


@dataclass
class _Plan:
    judge: JudgeProtocol
    report: JudgeReport
    #: (model, sample_id, k) -> (scoring protocol targets, keys per pass or a skip reason)
    items: dict[tuple[str, str, int], tuple[list[tuple[str, str]], list[str] | str]]
    calls: list[_Call]
    #: stored judgements reused, with the predictions that use them (linked unless dry run)
    cached: list[tuple[Judgement, list[tuple[str, str, int]]]]


def _describes(judge: JudgeProtocol, spec: str, sample) -> bool:
    """Whether the scoring protocol ``spec`` counts any metric this judge fills as describing
    ``sample`` (its ``applicable_metrics``; protocols without one take every judged metric)."""
    from medibench.protocols import load_protocol

    applies = getattr(load_protocol(spec), "applicable_metrics", None)
    if applies is None:
        return True
    names = applies(sample)
    if names is None:  # the protocol declares every metric applicable
        return True
    wanted = {f.metric for f in judge.fills if f.protocol == spec}
    return bool(wanted & set(names))


def _plan(store, jstore, judge, config, passes, policy, hashes) -> _Plan:
    report = JudgeReport(judge=judge.spec, judge_model=config.model)
    samples = {s.sample_id: s for s in store.samples()}
    preds = {(p.model, p.sample_id, p.k): p for p in store.predictions(status="ok")}
    targets: dict[tuple[str, str, int], list[tuple[str, str]]] = defaultdict(list)
    for s in store.scores():
        spec = f"{s.protocol}@{s.protocol_version}"
        if spec in judge.targets and s.status == "ok":
            sample = samples.get(s.sample_id)
            if sample is not None and not _describes(judge, spec, sample):
                continue  # e.g. MieDB's rubric on a perception record: not its metric at all
            targets[(s.model or "", s.sample_id, s.k)].append((s.protocol, s.protocol_version))
    items: dict = {}
    calls: dict[str, _Call] = {}
    for item, tgts in targets.items():
        model, sid, k = item
        sample, pred = samples.get(sid), preds.get(item)
        why: str | None = None
        if sample is None or pred is None or pred.path is None:
            why = "error: the run has no sample or prediction for this score row"
        elif skip := judge.skip_reason(sample):
            why = f"not judged: {skip}"
        else:
            path = Path(pred.path)
            path = path if path.is_absolute() else store.run_dir / path
            roles = judge.images(sample, path)
            try:
                digests = [[role, _hash(p, hashes)] for role, p in roles]
            except OSError as exc:
                why = f"error: cannot read {exc.filename}: {exc.strerror}"
        if why is not None or sample is None:
            report.skipped[why] += 1
            items[item] = (tgts, why)
            continue
        report.items += 1
        keys = []
        for p in range(passes):
            seed = None if config.seed is None else config.seed + p
            material = {
                "judge": judge.spec,
                "prompt_file": judge.prompt.filename,
                "prompt_version": judge.prompt.version,
                "prompt_sha256": judge.prompt.sha256,
                "judge_model": config.model,
                "endpoint": config.endpoint,
                "images": digests,
                "texts": judge.texts(sample),
                "decoding": config.decoding(seed),
                "structured_output": config.structured_output,
                "max_image_side": config.max_image_side,
                "oversize": config.oversize,
                "pass_index": p,
            }
            key = cache_key(material)
            keys.append(key)
            if key in calls:
                calls[key].links.append(item)
            else:
                calls[key] = _Call(key, material, p, seed, sample, [p_ for _, p_ in roles], [item])
        items[item] = (tgts, keys)
    stored = jstore.get_many(list(calls))
    todo, cached = [], []
    for key, call in calls.items():
        action = policy.action(stored.get(key))
        if action == "call":
            todo.append(call)
        elif action == "cached":
            report.cached += 1
            cached.append((stored[key], call.links))
    report.planned = len(todo)
    return _Plan(judge, report, items, todo, cached)


def _hash(path: Path, cache: dict[Path, str]) -> str:
    if path not in cache:
        cache[path] = sha256_file(path)
    return cache[path]


def _estimate(plan: _Plan, jstore: JudgementStore, config: JudgeConfig) -> float | None:
    if not config.has_prices:
        return None
    est = _Estimator(plan.judge, jstore, config)
    return sum(est(c) for c in plan.calls)


class _Estimator:
    """Cost guess for one call: the mean usage of answers seen (this run, else stored ones),
    else prompt characters / 4 plus ``est_image_tokens`` per image and ``est_output_tokens``."""

    def __init__(self, judge: JudgeProtocol, jstore: JudgementStore, config: JudgeConfig):
        self.judge, self.config = judge, config
        seen = jstore.usage(judge.spec, config.model)
        self.n, self.tin, self.tout = (
            (seen[2], seen[0] * seen[2], seen[1] * seen[2]) if seen else (0, 0.0, 0.0)
        )
        self.prompt_chars = sum(len(t) for t in judge.prompt.sections.values())

    def observe(self, tokens_in: int | None, tokens_out: int | None) -> None:
        if tokens_in is not None and tokens_out is not None:
            self.n, self.tin, self.tout = self.n + 1, self.tin + tokens_in, self.tout + tokens_out

    def __call__(self, call: _Call) -> float:
        if self.n:
            cost = self.config.cost(round(self.tin / self.n), round(self.tout / self.n))
        else:
            chars = self.prompt_chars + sum(len(t) for t in call.material["texts"].values())
            tokens_in = chars // 4 + len(call.paths) * self.config.est_image_tokens
            cost = self.config.cost(tokens_in, self.config.est_output_tokens)
        return 0.0 if cost is None else cost  # no prices: nothing to budget
