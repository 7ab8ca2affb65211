"""``medibench calibration grid CONFIG.yaml``: MVC-Bench's stability grid.

Every cell of methods x losses x seeds x templates x backbones is one ``calibration train`` run
in ``OUT/cells/<backbone>/<method>/<loss>/<template>/seed<k>`` (the folder names are the
values made file-safe, with a short hash of the value where that changed it); a cell with
``done.json`` is skipped. ``--executor ray`` runs the cells to do as Ray tasks (one CPU each)
on the cluster ``RAY_ADDRESS`` names, or on this machine. The tables (:mod:`._tables`) are
written to ``OUT/tables`` afterwards; ``OUT`` is a run folder, and ``medibench report OUT``
shows them.

The YAML::

    out: grid-out                      # relative paths: to the YAML's folder
    dataset: data/source@train         # the training data (PATH or PATH@SPLIT)
    shots: 16
    evals: {in-domain: data/source@test, shifted: data/shifted.parquet}
    reference: in-domain               # the in-domain set (default: the first eval)
    methods: [zero-shot, coop, kgcoop]
    losses: [ce, "mcm:alpha=0.1,beta=0.01", [ce, "focal:gamma=3"]]   # a cell's --loss list
    seeds: [1, 2, 3]
    templates: ["a photo of a {}.", "an image of {}."]
    backbones: ["clip:models/clip"]
    epochs: 50                         # optional, as --epochs/--lr/--batch-size
    options: {coop: {n_ctx: 4}}        # optional, per method --set
    augment: true
    bins: 15                           # bins of ECE/MCE/ACE in the tables (calibration@1)
    device: cpu                        # torch device of every cell (cuda: one GPU per Ray task)
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

from medibench.prompt_tuning._defaults import METHODS

__all__ = ["Cell", "Grid", "load_grid", "run_grid"]

_KEYS = {
    "out",
    "dataset",
    "shots",
    "evals",
    "reference",
    "methods",
    "losses",
    "seeds",
    "templates",
    "backbones",
    "epochs",
    "lr",
    "batch_size",
    "options",
    "augment",
    "bins",
    "device",
}


@dataclass(frozen=True)
class Cell:
    """One setting of the grid and its folder."""

    backbone: str
    method: str
    losses: tuple[str, ...]
    template: str
    seed: int
    folder: Path

    @property
    def loss(self) -> str:
        return "+".join(self.losses)


@dataclass
class Grid:
    """A parsed grid YAML (paths resolved)."""

    out: Path
    dataset: str
    evals: dict[str, str]
    reference: str
    methods: list[str]
    losses: list[tuple[str, ...]]
    seeds: list[int]
    templates: list[str]
    backbones: list[str]
    shots: int = 16
    train: dict[str, Any] = field(default_factory=dict)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    augment: bool = True
    bins: int = 15
    device: str = "cpu"

    def cells(self) -> list[Cell]:
        return [
            Cell(
                b,
                m,
                loss,
                t,
                s,
                self.out / "cells" / _slug(b) / m / _slug("+".join(loss)) / _slug(t) / f"seed{s}",
            )
            for b, m, loss, t, s in product(
                self.backbones, self.methods, self.losses, self.templates, self.seeds
            )
        ]


def load_grid(path: str | Path, *, out: str | Path | None = None) -> Grid:
    """Parse and check a grid YAML (module doc).

    Raises:
        ValueError: not a mapping, an unknown key, a missing or empty list, an unknown method,
            an unknown reference set.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such grid file")
    data, lines = _read_yaml(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a grid is a YAML mapping (see docs/calibration.md)")
    unknown = sorted(set(map(str, data)) - _KEYS)
    if unknown:
        raise ValueError(
            f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
        )
    for key in ("dataset", "evals", "methods", "seeds", "backbones"):
        if not data.get(key):
            raise ValueError(f"{path}: {key!r} is missing or empty")

    def where(key: str) -> str:
        return f"{path} line {lines[key]}: {key}" if key in lines else f"{path}: {key}"

    def items(key: str, kind: Any, what: str, default: list | None = None) -> list:
        value = data.get(key) if data.get(key) is not None else default
        if not isinstance(value, list):
            raise ValueError(f"{where(key)}: expected a list, got {_shape(value)}")
        for item in value:
            if not isinstance(item, kind) or isinstance(item, bool):
                raise ValueError(f"{where(key)}: expected a list of {what}, got {_shape(item)}")
        return value

    def mapping(key: str) -> dict:
        value = data.get(key) or {}
        if not isinstance(value, dict):
            raise ValueError(f"{where(key)}: expected a mapping, got {_shape(value)}")
        return value

    def scalar(key: str, kind: Any, what: str, default: Any) -> Any:
        value = data.get(key, default)
        if kind is float and isinstance(value, str):  # PyYAML reads 2e-3 (no dot) as text
            with contextlib.suppress(ValueError):
                value = float(value)
        types = (int, float) if kind is float else kind
        if isinstance(value, bool) and kind is not bool or not isinstance(value, types):
            raise ValueError(f"{where(key)}: expected {what}, got {_shape(value)}")
        if kind is float and not math.isfinite(value):
            raise ValueError(f"{where(key)}: expected a finite number, got {value}")
        return value

    base = path.parent
    methods = items("methods", str, "method names")
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(
            f"{where('methods')}: unknown method(s) {', '.join(bad)} (one of {', '.join(METHODS)})"
        )
    evals = {str(k): _resolve(base, str(v)) for k, v in mapping("evals").items()}
    reference = str(data.get("reference") or next(iter(evals)))
    if reference not in evals:
        raise ValueError(f"{path}: reference {reference!r} is not an eval set ({', '.join(evals)})")
    losses = []
    for x in items("losses", (str, list), "loss specs", ["ce"]):
        if isinstance(x, list) and not all(isinstance(v, str) for v in x):
            raise ValueError(f"{where('losses')}: a combination is a list of loss specs")
        losses.append(tuple([x] if isinstance(x, str) else x))
    options = mapping("options")
    for method, values in options.items():
        if not isinstance(values, dict):
            raise ValueError(
                f"{where('options')}: {method} takes a mapping of KEY: VALUE, got {_shape(values)}"
            )
    train = {}
    for key, kind in (("epochs", int), ("lr", float), ("batch_size", int)):
        if data.get(key) is not None:
            train[key] = scalar(key, kind, "a number", None)
    return Grid(
        out=Path(out) if out is not None else base / str(data.get("out", "grid-out")),
        dataset=_resolve(base, str(scalar("dataset", str, "a dataset path", None))),
        evals=evals,
        reference=reference,
        methods=methods,
        losses=losses,
        seeds=items("seeds", int, "whole numbers"),
        templates=items("templates", str, "texts", ["a photo of a {}."]),
        backbones=[_backbone(base, b) for b in items("backbones", str, "backbone specs")],
        shots=scalar("shots", int, "a whole number", 16),
        train=train,
        options={str(k): dict(v) for k, v in options.items()},
        augment=scalar("augment", bool, "true or false", True),
        bins=scalar("bins", int, "a whole number", 15),
        device=scalar("device", str, "a torch device", "cpu"),
    )


def _read_yaml(path: Path) -> tuple[Any, dict[str, int]]:
    """The YAML document of ``path`` and the line (1-based) of each top-level key; a syntax
    error is a one-line ValueError naming the file, line and column."""
    import yaml

    text = path.read_text("utf-8")
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"{path}{at}: not valid YAML ({problem})") from None
    lines = {}
    if isinstance(node, yaml.MappingNode):
        lines = {str(k.value): k.start_mark.line + 1 for k, _ in node.value}
    return data, lines


def _shape(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"[:80]


def run_grid(grid: Grid, *, executor: str = "local", log: Any = None) -> dict[str, Any]:
    """Train every cell not done, then write the tables; returns ``{"cells", "trained",
    "skipped", "tables", "failed"}``."""
    from medibench.prompt_tuning._tables import write_tables

    say = log or (lambda _m: None)
    if executor not in ("local", "ray"):
        raise ValueError(f"--executor must be 'local' or 'ray', got {executor!r}")
    cells = grid.cells()
    todo = [c for c in cells if not (c.folder / "done.json").is_file()]
    say(f"{len(cells)} cells, {len(cells) - len(todo)} done before, {len(todo)} to train")
    failed = []
    jobs = [_settings(grid, c) for c in todo]
    results = _run_local(jobs) if executor == "local" else _run_ray(jobs)
    for cell, error in zip(todo, results, strict=True):
        if error:
            failed.append({"cell": str(cell.folder), "error": error})
            say(f"FAILED {cell.folder}: {error}")
        else:
            say(f"done {cell.folder.relative_to(grid.out)}")
    if failed:
        raise ValueError(
            f"{len(failed)} cell(s) failed, first: {failed[0]['cell']}: {failed[0]['error']}"
        )
    tables = write_tables(grid, cells)
    return {
        "cells": len(cells),
        "trained": len(todo),
        "skipped": len(cells) - len(todo),
        "tables": str(tables),
        "failed": failed,
    }


def train_cell(settings: dict[str, Any]) -> str | None:
    """Train one cell from its settings (a plain dict, so Ray can ship it); the error or None."""
    from medibench.prompt_tuning._train import TrainSettings, train

    try:
        train(TrainSettings(**settings))
    except Exception as exc:  # a failed cell is reported with the others, the grid goes on
        return f"{type(exc).__name__}: {exc}"
    return None


def _run_local(jobs: list[dict[str, Any]]) -> list[str | None]:
    return [train_cell(job) for job in jobs]


def _run_ray(jobs: list[dict[str, Any]]) -> list[str | None]:
    """One Ray task per cell: one CPU, and one GPU when the cells train on ``cuda``. A cell lost
    with its node trains again elsewhere (it resumes from what it wrote), a bounded number of
    times; then :class:`~medibench._ray.LostWorkError` stops the grid (a re-run resumes)."""
    from medibench._ray import join_cluster, run_tasks
    from medibench.io._write import remove_stale_temps

    join_cluster()
    gpus = 1 if any(str(j.get("device", "cpu")).startswith("cuda") for j in jobs) else 0
    cells = ((job["out"], (job,)) for job in jobs)  # a cell's folder names it
    results = dict(run_tasks(train_cell, cells, kind="grid cell", num_gpus=gpus))
    for job in jobs:  # a cell's worker lost with its node may have left a temp file
        remove_stale_temps(job["out"])
    return [results[job["out"]] for job in jobs]


def _settings(grid: Grid, cell: Cell) -> dict[str, Any]:
    return {
        "dataset": grid.dataset,
        "backbone": cell.backbone,
        "method": cell.method,
        "out": str(cell.folder),
        "shots": grid.shots,
        "seed": cell.seed,
        "losses": list(cell.losses),
        "template": cell.template,
        "evals": dict(grid.evals),
        "options": dict(grid.options.get(cell.method, {})),
        "augment": grid.augment,
        "device": grid.device,
        **grid.train,
    }


def _resolve(base: Path, spec: str) -> str:
    path, sep, split = spec.rpartition("@")
    if not sep or "/" in split:
        path, split = spec, ""
    p = Path(path)
    resolved = str(p if p.is_absolute() else base / p)
    return f"{resolved}@{split}" if split else resolved


def _backbone(base: Path, spec: str) -> str:
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in ("clip", "siglip", "hf") and not Path(rest).is_absolute():
        return f"{prefix}:{base / rest}"
    return spec


def _slug(value: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", value).strip("_")[:40] or "_"
    if safe == value:
        return safe
    return f"{safe}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"
