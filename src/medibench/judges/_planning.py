"""Planning a judge's calls over a run: what to judge, each call's cache key, what is cached.

Every (model, sample, k) with an ``ok`` score row under a scoring protocol the judge fills gets one
call per pass; its cache key comes from file hashes and texts only (no image is decoded for a cache
hit). :class:`JudgeReport` starts here and is completed by the calling and filling steps.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
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
    shown: dict[tuple[str, str, int], tuple[object, list[tuple[str, Path]]] | str] = {}
    for item in targets:
        sample, pred = samples.get(item[1]), preds.get(item)
        if sample is None or pred is None or pred.path is None:
            shown[item] = "error: the run has no sample or prediction for this score row"
        elif skip := judge.skip_reason(sample):
            shown[item] = f"not judged: {skip}"
        else:
            path = Path(pred.path)
            path = path if path.is_absolute() else store.run_dir / path
            shown[item] = (sample, judge.images(sample, path))
    _hash_all([p for v in shown.values() if not isinstance(v, str) for _, p in v[1]], hashes)
    for item, tgts in targets.items():
        why: str | None = None
        got = shown[item]
        if isinstance(got, str):
            why, sample = got, None
        else:
            sample, roles = got
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


def _hash(path: Path, cache: dict[Path, str | OSError]) -> str:
    if path not in cache:
        _hash_all([path], cache)
    got = cache[path]
    if isinstance(got, OSError):
        raise got
    return got


def _hash_all(paths: list[Path], cache: dict[Path, str | OSError]) -> None:
    """The sha256 of each of ``paths`` not yet in ``cache`` (or the OSError reading it), on
    :data:`HASH_THREADS` threads: hashlib lets go of the GIL while it hashes, and planning a
    judge of three 256x256 PNGs per call spent 0.4 ms of its 0.6 ms per call hashing."""
    todo = list(dict.fromkeys(p for p in paths if p not in cache))
    if not todo:
        return

    def one(path: Path) -> str | OSError:
        try:
            return sha256_file(path)
        except OSError as exc:
            return exc

    if len(todo) < 2 * HASH_THREADS:
        cache.update(zip(todo, map(one, todo), strict=True))
        return
    with ThreadPoolExecutor(HASH_THREADS, thread_name_prefix="medibench-judge-hash") as pool:
        cache.update(zip(todo, pool.map(one, todo, chunksize=16), strict=True))


#: Threads hashing the image files of a plan.
HASH_THREADS = max(1, min(4, os.cpu_count() or 1))


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
