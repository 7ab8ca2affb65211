"""Shards for clusters without Ray, and merging their run stores.

``--shard i/n`` runs samples ``i, i + n, i + 2n, ...`` of the dataset (in its order). Without the
flag the shard comes from the launcher: ``RANK``/``WORLD_SIZE`` (torchrun) or
``SLURM_PROCID``/``SLURM_NTASKS`` (srun). Shards that run at the same time write their own run
folders (one process per run folder: a second one exits 3): a ``{shard}`` in the run folder's
name becomes ``i-of-n``; shards run one after another may share one. :func:`merge` then gathers
shard runs into one: samples, predictions with their files, and scores, refusing runs made with
another dataset, seed, protocol version or model spec, and two models' outputs at one path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from medibench.io import atomic_write_bytes, sha256_file
from medibench.runs import _tables
from medibench.runs._rename import RenamedStore, model_names, parse_renames
from medibench.runs._store import CORE_TABLES, RunStore, RunStoreError
from medibench.samples import Prediction

__all__ = ["MergeReport", "Shard", "merge", "resolve_shard", "shard_run_dir"]

T = TypeVar("T")
_ENV_PAIRS = (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"))
_SPECS_KEY = "model_specs_by_name"  # written by medibench.runs._models


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count}: need 0 <= i < n")

    def select(self, items: Sequence[T]) -> Sequence[T]:
        """This shard's items: every ``count``-th, starting at ``index`` (a slice of
        ``items``: a dataset's slice rebuilds no sample)."""
        return items[self.index :: self.count]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def resolve_shard(text: str | None, env: Mapping[str, str] | None = None) -> Shard | None:
    """``"i/n"`` -> :class:`Shard`; ``None`` -> the launcher's shard, or ``None`` for one process.

    Raises ``ValueError`` for a malformed flag or inconsistent environment variables.
    """
    if text:
        i, sep, n = text.partition("/")
        try:
            return Shard(int(i), int(n)) if sep else _bad(text)
        except ValueError as exc:
            raise ValueError(f"--shard {text!r}: expected i/n with 0 <= i < n ({exc})") from None
    env = os.environ if env is None else env
    for rank, size in _ENV_PAIRS:
        if env.get(rank) is not None and env.get(size) is not None:
            try:
                shard = Shard(int(env[rank]), int(env[size]))
            except ValueError as exc:
                raise ValueError(f"{rank}={env[rank]!r}, {size}={env[size]!r}: {exc}") from None
            return shard if shard.count > 1 else None
    return None


def shard_run_dir(run_dir: str | os.PathLike, shard: Shard | None) -> Path:
    """The run folder for ``shard``: ``{shard}`` in the name becomes ``i-of-n`` (or ``all``)."""
    text = str(run_dir)
    if "{shard}" not in text:
        return Path(text)
    return Path(text.replace("{shard}", f"{shard.index}-of-{shard.count}" if shard else "all"))


@dataclass
class MergeReport:
    """What :func:`merge` did."""

    samples: int = 0
    predictions: int = 0
    files: int = 0
    scores: int = 0
    #: rows merged into each stage table (judgements, ...), by table name
    tables: dict[str, int] = field(default_factory=dict)
    #: tables left out (none since every table is declared; kept for callers that read it)
    skipped_tables: list[str] = field(default_factory=list)


def merge(
    sources: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    renames: Sequence[str] = (),
) -> MergeReport:
    """Merge run stores into ``out`` (created, or an existing run that joins the merge).

    ``renames`` (``OLD=NEW`` or ``RUN:OLD=NEW``, :func:`~medibench.runs._rename.parse_renames`)
    rename models as they are merged, so runs of same-named models sit side by side.

    Refuses (``RunStoreError``, nothing written) runs made with another dataset or seed, a
    protocol at two versions, one sample id with two records, and two different successful
    outputs for one (model, sample, k). A successful output wins over a failed one. Scores come
    with the outputs they scored. Every table a stage declared (judgements, judge spend, ...)
    is merged too: the first row of each key is kept (a ledger keeps every distinct row), and a
    row of one output (``model``, ``sample_id``, ``k``) comes only with the output kept.
    """
    out = Path(out)
    paths = [Path(p) for p in sources]
    if not paths:
        raise RunStoreError("merge needs at least one run")
    if any(p.resolve() == out.resolve() for p in paths):
        raise RunStoreError(f"{out} is one of the runs to merge: give another --out")
    stores: list = [RunStore.open_existing(p) for p in paths]
    if renames:
        try:
            per_run = parse_renames(renames, paths, [model_names(st) for st in stores])
        except RunStoreError:
            for st in stores:
                st.close()
            raise
        stores = [
            RenamedStore(st, mine) if mine else st for st, mine in zip(stores, per_run, strict=True)
        ]
    target = RunStore(out)
    try:
        everyone = [target, *stores] if target.get_meta("config") else stores
        config = _merged_config(everyone)
        specs = _merged_model_specs(everyone)
        samples = _merged_samples(everyone)
        chosen, fingerprints = _chosen_predictions(everyone)
        report = MergeReport(samples=len(samples))
        target.set_meta("config", config)
        if specs:
            target.set_meta(_SPECS_KEY, specs)
        target.set_meta("merged_from", [str(p.resolve()) for p in paths])
        for name in ("packages", "python", "created_at"):
            if target.get_meta(name) is None and stores[0].get_meta(name) is not None:
                target.set_meta(name, stores[0].get_meta(name))
        target.put_samples(samples.values())
        for store, pred in chosen.values():
            if store is target:
                continue
            if pred.path is not None:
                src = store.run_dir / _source_path(store, pred.path)
                atomic_write_bytes(target.run_dir / pred.path, src.read_bytes())
                report.files += 1
            target.put_prediction(pred)
            report.predictions += 1
        have = {
            (s.model, s.sample_id, s.k, s.protocol, s.protocol_version) for s in target.scores()
        }
        for store in everyone:
            if store is target:
                continue
            for s in store.scores():
                key = (s.model or "", s.sample_id, s.k)
                full = (s.model, s.sample_id, s.k, s.protocol, s.protocol_version)
                same = fingerprints.get((id(store), key)) == fingerprints.get(("chosen", key))
                if full not in have and same:
                    target.put_score(s)
                    have.add(full)
                    report.scores += 1
        for store in everyone:
            if store is not target:
                _merge_stage_tables(store, target, fingerprints, report)
        return report
    finally:
        target.close()
        for st in stores:
            st.close()


# -- helpers --------------------------------------------------------------------------------
def _bad(text: str) -> Shard:
    raise ValueError(f"{text!r} has no '/'")


def _merged_config(stores: Sequence[RunStore]) -> dict:
    merged: dict = {}
    problems = []
    for st in stores:
        cfg = st.get_meta("config") or {}
        for key in ("dataset", "seed"):
            if key in merged and key in cfg and merged[key] != cfg[key]:
                problems.append(f"{st.run_dir} has {key}={cfg[key]!r}, not {merged[key]!r}")
        protos = {**merged.get("protocols", {})}
        for name, version in (cfg.get("protocols") or {}).items():
            if protos.get(name, version) != version:
                problems.append(f"{st.run_dir} scores {name}@{version}, not @{protos[name]}")
            protos[name] = version
        models = sorted(set(merged.get("models", [])) | set(cfg.get("models", [])))
        k = max(merged.get("k", 0) or 0, cfg.get("k", 0) or 0) or None
        specs = list(merged.get("model_specs", []))
        specs += [m for m in cfg.get("model_specs") or [] if m not in specs]
        merged = {**cfg, **merged, "protocols": protos, "models": models}
        if k is not None:
            merged["k"] = k
        if specs:
            merged["model_specs"] = specs
    merged.pop("shard", None)
    if problems:
        raise RunStoreError("runs made differently cannot be merged:\n  " + "\n  ".join(problems))
    return merged


def _merged_model_specs(stores: Sequence[RunStore]) -> dict:
    """Each model name's resolved spec; one name with two specs is not one model."""
    specs: dict = {}
    for st in stores:
        for name, spec in (st.get_meta(_SPECS_KEY) or {}).items():
            if specs.get(name, spec) != spec:
                raise RunStoreError(
                    f"model {name!r} has spec {spec} in {st.run_dir}, not {specs[name]}: "
                    "these runs are not shards of one run"
                )
            specs[name] = spec
    return specs


def _merged_samples(stores: Sequence[RunStore]) -> dict:
    samples: dict = {}
    for st in stores:
        for s in st.samples():
            if s.sample_id in samples and samples[s.sample_id] != s:
                raise RunStoreError(
                    f"sample '{s.sample_id}' differs between runs ({st.run_dir}): "
                    "these runs are not shards of one dataset"
                )
            samples[s.sample_id] = s
    return samples


def _chosen_predictions(stores: Sequence[RunStore]):
    """Per (model, sample, k): the prediction to keep and fingerprints to match scores with."""
    chosen: dict[tuple, tuple[RunStore, Prediction]] = {}
    prints: dict = {}
    conflicts = []
    owners: dict[str, str] = {}  # output path -> model: two models never share a file
    for st in stores:
        for p in st.predictions():
            key = (p.model, p.sample_id, p.k)
            if p.path is not None and owners.setdefault(p.path, p.model) != p.model:
                conflicts.append(
                    f"{p.path} is an output of both {owners[p.path]!r} and {p.model!r}"
                )
            fp = _fingerprint(st, p)
            prints[(id(st), key)] = fp
            if key not in chosen or (chosen[key][1].status != "ok" and p.status == "ok"):
                chosen[key] = (st, p)
                prints[("chosen", key)] = fp
            elif p.status == "ok" and fp != prints[("chosen", key)]:
                conflicts.append(
                    f"{p.model}/{p.sample_id}_{p.k}: {chosen[key][0].run_dir} "
                    f"and {st.run_dir} hold different outputs"
                )
    if conflicts:
        more = f"\n  ... and {len(conflicts) - 5} more" if len(conflicts) > 5 else ""
        raise RunStoreError("conflicting outputs:\n  " + "\n  ".join(conflicts[:5]) + more)
    return chosen, prints


def _source_path(store, path: str) -> str:
    # a renamed model's output moves to its new folder; the file is read where it is
    return store.source_path(path) if isinstance(store, RenamedStore) else path


def _fingerprint(store: RunStore, p: Prediction) -> tuple:
    if p.status != "ok" or p.path is None:
        return (p.status, p.seed, None)
    path = store.run_dir / _source_path(store, p.path)
    if not path.is_file():
        raise RunStoreError(f"{store.run_dir}: output {path} of {p.model}/{p.sample_id} is missing")
    return (p.status, p.seed, sha256_file(path))


def _merge_stage_tables(store: RunStore, target: RunStore, fingerprints: dict, report) -> None:
    """Copy ``store``'s stage tables into ``target`` (declaring them there as ``store`` did)."""
    for table in store.tables():
        if table.name in CORE_TABLES:
            continue
        sql = _tables.table_sql(store.connection, table.name)
        columns = sql[sql.index("(") + 1 : sql.rindex(")")]
        mine = target.declare_table(
            table.name, columns, table.key, stage=table.stage, per_output=table.per_output
        )
        cols, rows = store.table_rows(table.name)
        if table.per_output:
            at = [cols.index(c) for c in _tables.OUTPUT_COLUMNS]
            rows = [
                r
                for r in rows
                if fingerprints.get((id(store), key := tuple(r[i] for i in at)))
                == fingerprints.get(("chosen", key))
            ]
        with target.transaction():
            n = _tables.copy_rows(target.connection, mine, cols, rows)
        report.tables[table.name] = report.tables.get(table.name, 0) + n
