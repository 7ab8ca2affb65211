"""Model renames for ``medibench merge --rename`` and ``medibench compare``: runs of models with
one name (a base and a fine-tuned ``ip2p``, ablation variants, K sweeps) merge side by side.

``OLD=NEW`` renames model ``OLD`` in every run that holds it; ``RUN:OLD=NEW`` in that run only.
A renamed model's outputs move to ``outputs/<folder of NEW>`` (folders stay one per name); its
recorded spec keeps the original name in its options and gains ``renamed_from: OLD``.
:class:`RenamedStore` is a read-only view of a run store with its renames applied, which
:func:`medibench.runs._shard.merge` reads as it reads a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medibench._identity import output_folder
from medibench.runs._store import RunStore, RunStoreError

__all__ = ["RenamedStore", "model_names", "parse_renames"]

_SPECS_KEY = "model_specs_by_name"  # written by medibench.runs._models


def parse_renames(
    texts: Sequence[str], runs: Sequence[Path], models: Sequence[Sequence[str]]
) -> list[dict[str, str]]:
    """Each run's ``{old: new}`` from ``--rename`` texts; ``models[i]`` are run ``i``'s model names.

    Raises :class:`RunStoreError` for a text without ``=``, a run not among ``runs``, a model no
    named run holds, two renames of one model in one run, and a new name the run already uses.
    """
    per_run: list[dict[str, str]] = [{} for _ in runs]
    for text in texts:
        left, eq, new = text.rpartition("=")
        if not eq or not left or not new:
            raise RunStoreError(f"--rename {text!r}: expected OLD=NEW or RUN:OLD=NEW")
        at, old = _which_runs(left, runs)
        found = [i for i in at if old in models[i]]
        if not found:
            where = runs[at[0]] if len(at) == 1 else "any of the runs"
            raise RunStoreError(
                f"--rename {text!r}: {where} holds no model {old!r} "
                f"(models: {', '.join(sorted({m for i in at for m in models[i]})) or 'none'})"
            )
        for i in found:
            if old in per_run[i] and per_run[i][old] != new:
                raise RunStoreError(
                    f"--rename {text!r}: model {old!r} of {runs[i]} is already renamed to "
                    f"{per_run[i][old]!r}; name the run (RUN:OLD=NEW) to rename it once"
                )
            per_run[i][old] = new
    for i, renames in enumerate(per_run):
        kept = set(models[i]) - set(renames)
        names = [*kept, *renames.values()]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise RunStoreError(
                f"--rename: {runs[i]} would hold two models named {twice[0]!r}; "
                "give each its own new name"
            )
    return per_run


def model_names(store: RunStore) -> list[str]:
    """Every model name ``store`` holds: recorded specs, the config's list, outputs, scores."""
    names = set((store.get_meta(_SPECS_KEY) or {}).keys())
    names.update((store.get_meta("config") or {}).get("models") or [])
    names.update(p.model for p in store.predictions())
    names.update(s.model for s in store.scores() if s.model)
    return sorted(names)


def _which_runs(left: str, runs: Sequence[Path]) -> tuple[list[int], str]:
    """``RUN:OLD`` -> (that run's index, ``OLD``); ``OLD`` alone -> (every run, ``OLD``)."""
    run, colon, old = left.rpartition(":")
    if colon and run:
        at = [i for i, r in enumerate(runs) if _same_path(Path(run), r)]
        if at:
            return at, old
        if not any(":" in str(r) for r in runs):
            names = ", ".join(str(r) for r in runs)
            raise RunStoreError(f"--rename {left!r}: {run!r} is not one of the runs ({names})")
    return list(range(len(runs))), left


def _same_path(a: Path, b: Path) -> bool:
    return a == b or a.resolve() == b.resolve()


class RenamedStore:
    """``store`` read with its models renamed by ``renames`` (``{old: new}``): predictions,
    scores, stage-table rows with a ``model`` column, the recorded specs and the config's model
    list. :meth:`source_path` maps a renamed output path back to the file in ``store``."""

    def __init__(self, store: RunStore, renames: Mapping[str, str]) -> None:
        self.store = store
        self.renames = dict(renames)
        self.run_dir = store.run_dir
        self.connection = store.connection
        self._sources: dict[str, str] = {}

    def __getattr__(self, name: str) -> Any:  # samples, tables, close, ...
        return getattr(self.store, name)

    def source_path(self, path: str) -> str:
        return self._sources.get(path, path)

    def predictions(self, *args: Any, **kwargs: Any) -> list:
        out = []
        for p in self.store.predictions(*args, **kwargs):
            new = self.renames.get(p.model)
            if new is None:
                out.append(p)
                continue
            path = p.path
            if path is not None:
                moved = f"outputs/{output_folder(new)}/{Path(path).name}"
                self._sources[moved] = path
                path = moved
            out.append(p.model_copy(update={"model": new, "path": path}))
        return out

    def scores(self, *args: Any, **kwargs: Any) -> list:
        return [
            s.model_copy(update={"model": self.renames[s.model]}) if s.model in self.renames else s
            for s in self.store.scores(*args, **kwargs)
        ]

    def table_rows(self, name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        cols, rows = self.store.table_rows(name)
        if "model" not in cols or not self.renames:
            return cols, rows
        at = cols.index("model")
        renamed = [(*r[:at], self.renames.get(r[at], r[at]), *r[at + 1 :]) for r in rows]
        return cols, renamed

    def get_meta(self, key: str, default: Any = None) -> Any:
        value = self.store.get_meta(key, default)
        if key == _SPECS_KEY and value:
            return {
                self.renames.get(name, name): (
                    {**spec, "renamed_from": spec.get("renamed_from", name)}
                    if name in self.renames
                    else spec
                )
                for name, spec in value.items()
            }
        if key == "config" and value and value.get("models"):
            return {**value, "models": [self.renames.get(m, m) for m in value["models"]]}
        return value
