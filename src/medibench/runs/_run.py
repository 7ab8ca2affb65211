"""A whole run from a :class:`~medibench.runs.RunConfig`: plan it, then generate and score.

:func:`run` is the one orchestration of a run: the ``medibench run`` and ``medibench demo``
commands, ``bench/`` and the tests all call it. It holds the run folder's lock for the whole run,
checks every model spec against the run's before any model runs, and prints one summary line per
stage (progress bars when asked) on ``console``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.text import Text

from medibench._console import labelled
from medibench.datasets import Dataset
from medibench.runs._config import RunConfig, RunError
from medibench.runs._executors import LocalExecutor, RayExecutor
from medibench.runs._icl import (
    TOO_FEW,
    IclPlan,
    check_takes_examples,
    entry_spec,
    icl_entries,
    plan_icl,
    refuse_without_examples,
)
from medibench.runs._lock import run_folder_lock
from medibench.runs._models import (
    charge_budget,
    check_model_specs,
    check_unique_names,
    generation_budget,
    planned_name,
    record_model_specs,
    record_runtime,
    resolved_spec,
)
from medibench.runs._runner import StageReport, generate, record_environment, score
from medibench.runs._shard import Shard, resolve_shard, shard_run_dir
from medibench.runs._store import RunStore, RunStoreError
from medibench.samples import Sample

__all__ = ["RunPlan", "plan_run", "run", "summarise"]

T = TypeVar("T")

#: What a bad spec raises (an unknown name, a bad option, a missing file, a missing extra).
_BAD_INPUT = (KeyError, ValueError, FileNotFoundError, ImportError)


@dataclass(frozen=True)
class RunPlan:
    """A config with its dataset loaded: what :func:`run` will do, before it does it.

    Attributes:
        config: the config it was made from.
        dataset: the loaded dataset.
        samples: the samples of this run (of the dataset's first ``limit``, its shard's share),
            a slice of ``dataset``: each sample is rebuilt as a stage reaches it.
        protocols: the ``name@version`` specs it scores by (the config's, or the dataset's).
        shard: the shard, or ``None`` for every sample.
        folder: the run folder (``{shard}`` filled in).
    """

    config: RunConfig
    dataset: Dataset
    samples: Sequence[Sample]
    protocols: tuple[str, ...]
    shard: Shard | None
    folder: Path


def plan_run(config: RunConfig) -> RunPlan:
    """Resolve the shard and the run folder, load the dataset; :class:`RunError` for a bad
    shard or dataset spec, or a dataset with no samples."""
    from medibench.datasets import load_dataset

    shard = _checked(resolve_shard, config.shard)
    folder = shard_run_dir(config.out, shard)
    ds = _checked(load_dataset, config.dataset, **config.dataset_options)
    if len(ds) == 0:
        from medibench.datasets._base import no_samples

        raise RunError(no_samples(ds, config.dataset))
    samples = ds[: config.limit]  # None: all; the limit first, so shards split it
    samples = samples if shard is None else shard.select(samples)
    protocols = config.protocols or tuple(ds.default_protocols)
    return RunPlan(config, ds, samples, protocols, shard, folder)


def run(
    config: RunConfig | RunPlan, *, progress: bool = True, console: Console | None = None
) -> RunStore:
    """Run the models of ``config`` on its dataset and score their outputs; a re-run resumes.

    Holds the run folder's lock throughout (:class:`~medibench.runs.RunFolderInUse` when another
    process has it). Returns the run's store, open: use it in a ``with`` block.

    Raises:
        RunError: a bad spec, or a model spec that clashes with the one the run recorded.
        RunFolderInUse: another process is writing the run folder.
        DiskFullError: the disk filled up (finished items are stored; re-run to resume).
    """
    plan = config if isinstance(config, RunPlan) else plan_run(config)
    console = console or Console(stderr=True, soft_wrap=True)
    with run_folder_lock(plan.folder):
        return _execute(plan, progress, console)


#: What the summary says of the items with too few demonstrations, by ``--icl-fallback``.
_FEW_DEMOS = {
    "refuse": f"not made, status {TOO_FEW} (--icl-fallback refuse; see --icl-fallback random "
    "or fewer)",
    "random": "the rest drawn at random from the whole pool (--icl-fallback random)",
    "fewer": "shown those there are (--icl-fallback fewer)",
}


def summarise(rep: StageReport, label: str, console: Console) -> None:
    """One line of counts for a stage, then up to five of its failures."""
    err = console
    not_made = rep.few_demos.get("refuse", 0)
    err.print(
        f"{rep.stage} {label}: {rep.done} done, {rep.skipped} already done, {rep.failed} failed"
        + (f", {rep.refused} refused" if rep.refused else "")
        + (f", {not_made} {TOO_FEW}" if not_made else "")
    )
    if rep.skipped_refused:
        err.print(
            f"  {rep.skipped_refused} refused before, not asked again (--retry-refused asks again)"
        )
    if rep.not_started:
        err.print(
            f"  {rep.not_started} not started: the cost budget (--max-cost) is spent; a run "
            "with a larger one makes them"
        )
    for fallback, n in rep.few_demos.items():
        err.print(f"  {n} with fewer eligible demonstrations than K = {rep.few_demos_k}: "
                  + _FEW_DEMOS[fallback])  # fmt: skip
    if rep.pixel_copies:
        err.print(
            f"  {rep.pixel_copies} with a pixel-identical copy of their image in the "
            "demonstration pool (another id): never shown to them"
        )
    if rep.few_demos_why:
        err.print(Text("  ").append(labelled("first", rep.few_demos_why, "yellow")))
    for item, msg in rep.failures[:5]:
        err.print(Text("  ").append(labelled("failed", f"{item}: {msg}", "yellow")))
    if len(rep.failures) > 5:
        err.print(f"  ... and {len(rep.failures) - 5} more (see the run store)")


# -- the stages -------------------------------------------------------------------------------
def _execute(plan: RunPlan, progress: bool, console: Console) -> RunStore:
    from medibench.models._spec import parse_model_spec
    from medibench.protocols import load_protocol

    cfg = plan.config
    protos = [_checked(load_protocol, p) for p in plan.protocols]
    specs = [_checked(parse_model_spec, m, options=list(cfg.model_options)) for m in cfg.models]
    for spec in specs:
        _checked(spec.check_options)
        if cfg.executor == "ray" and cfg.generates and _answers(spec):
            raise RunError(
                f"--model {spec.model!r} answers with text: answering models run with "
                "--executor local (the Ray actors run editing models)"
            )
    icl = _checked(_plan_icl, plan) if cfg.icl_k else None
    if icl is not None and icl.asks_examples and cfg.generates:
        for spec in specs:  # what cannot take examples is refused before anything runs
            _checked(refuse_without_examples, spec)
    planned = [planned_name(spec) for spec in specs]
    entries = [icl_entries(name, icl) for name in planned]  # NAME@icl-K per --icl-k
    named = [(text, e) for text, es in zip(cfg.models, entries, strict=True) for _, e in es]
    _checked(check_unique_names, named)
    resolved = [resolved_spec(spec) for spec in specs]
    if cfg.max_cost is not None and cfg.executor == "ray" and cfg.generates:
        raise RunError("--max-cost needs --executor local: the cost budget is kept in this process")
    runner = _executor(cfg)
    config: dict[str, Any] = {
        "dataset": cfg.dataset,
        "models": list(cfg.models),
        "model_specs": [spec.to_dict() for spec in specs],
        "k": cfg.k,
        "limit": cfg.limit,
        "seed": cfg.seed,
        "protocols": {p.name: p.version for p in protos},
    }
    if plan.shard is not None:
        config["shard"] = str(plan.shard)
    if icl is not None:
        settings = {k: v for k, v in icl.describe(0).items() if k != "k"}
        config["icl"] = {"ks": list(icl.ks), **settings, "fallback": icl.fallback}
    store = RunStore(plan.folder)
    try:
        try:
            record_environment(store, config)
            if cfg.generates:  # every known name checked before any model runs
                known = {
                    e: entry_spec(r, icl, k)
                    for es, r in zip(entries, resolved, strict=True)
                    for k, e in es
                    if e is not None
                }
                record_model_specs(store, known)
        except RunStoreError as exc:
            raise RunError(str(exc)) from exc
        store.put_samples(plan.samples)
        if cfg.generates:
            budget = None if cfg.max_cost is None else generation_budget(store, cfg.max_cost)
            made: list[str] = []
            for i, (spec, plan_name, res) in enumerate(zip(specs, planned, resolved, strict=True)):
                if cfg.executor == "ray":
                    model: Any = spec
                    name = _checked(runner.start, spec)  # type: ignore[union-attr]
                else:
                    model = _checked(spec.load)
                    name = getattr(model, "name", spec.model)
                if icl is not None and icl.asks_examples and cfg.executor != "ray":
                    _checked(check_takes_examples, model, name)  # Ray: its class, above
                mine = [(k_icl, entry or name) for k_icl, entry in icl_entries(name, icl)]
                if name != plan_name:  # only the built model knew its name: check it now
                    others = [e for j, es in enumerate(entries) if j != i for _, e in es]
                    for k_icl, entry in mine:
                        entry_res = entry_spec(res, icl, k_icl)
                        _check_built_name(store, spec.model, entry, entry_res, others, None, made)
                if (runtime := record_runtime(store, name, model)) is not None:
                    console.print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in runtime.items()))
                made += [entry for _, entry in mine]
                if budget is not None:
                    _checked(charge_budget, model, name, budget)
                for k_icl, entry in mine:
                    try:
                        rep = generate(
                            store,
                            plan.samples,
                            model,
                            model_name=entry,
                            k=cfg.k,
                            seed=cfg.seed,
                            only_failed=cfg.only_failed,
                            retry_refused=cfg.retry_refused,
                            progress=progress,
                            console=console,
                            executor=runner,
                            demonstrations=_demonstrations(icl, k_icl, model),
                        )
                    except RunStoreError as exc:
                        raise RunError(str(exc)) from exc
                    summarise(rep, entry, console)
        if cfg.scores:
            for proto in protos:
                rep = score(
                    store,
                    plan.samples,
                    proto,
                    only_failed=cfg.only_failed,
                    progress=progress,
                    console=console,
                    executor=runner,
                )
                summarise(rep, f"{proto.name}@{proto.version}", console)
    except BaseException:
        store.close()
        raise
    finally:
        runner.close()
    return store


def _plan_icl(plan: RunPlan) -> IclPlan:
    cfg = plan.config
    return plan_icl(
        cfg.icl_k,
        pool=cfg.icl_pool,
        select=cfg.icl_select,
        embedding=cfg.icl_embedding,
        dataset=cfg.dataset,
        dataset_options=dict(cfg.dataset_options),
        samples=plan.samples,
        loaded=plan.dataset,
        seed=cfg.seed,
        fallback=cfg.icl_fallback,
    )


def _demonstrations(icl: IclPlan | None, k: int | None, model: Any) -> Any:
    return None if icl is None or k is None else icl.entry(k, model)


def _executor(cfg: RunConfig) -> LocalExecutor | RayExecutor:
    if cfg.executor != "ray":
        return LocalExecutor(workers=cfg.workers)
    try:
        return _checked(RayExecutor, workers=cfg.workers, address=cfg.ray_address)
    except ConnectionError as exc:  # RayClusterNotFoundError: one line, what to do
        raise RunError(str(exc)) from exc


def _check_built_name(
    store: RunStore,
    model: str,
    name: str,
    res: dict[str, Any],
    planned: Sequence[str | None],
    plan_name: str | None,
    made: Sequence[str],
) -> None:
    others = [n for n in planned if n is not None and n != plan_name] + list(made)
    if name in others:
        raise RunError(
            f"--model {model!r} is named {name!r}, like another --model of this run: "
            "give it another name"
        )
    try:
        check_model_specs(store, {name: res})
        record_model_specs(store, {name: res})
    except RunStoreError as exc:
        raise RunError(str(exc)) from exc


def _answers(spec: Any) -> bool:
    """Whether a spec's factory makes an answering model (a VLM or generator class)."""
    try:
        factory = spec.factory()
    except Exception:  # reported when the model is built
        return False
    return any(callable(getattr(factory, m, None)) for m in ("answer", "generate"))


def _checked(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except _BAD_INPUT as exc:
        raise RunError(str(exc)) from exc
