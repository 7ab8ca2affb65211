"""PaintBench layouts (docs/protocols.md): procedural editing problems with exact answers.

The folder is one benchmark as PaintBench's ``generate_benchmark.py`` writes it (``benchmarks/
PaintBench``; ``benchmarks/TinyGrafixBench`` has the same layout), or the ``benchmarks/`` folder
holding a ``PaintBench`` sub-folder::

    root/
      <task>/NNN_input.png   the input (NNN: problem id, 3 digits)
      <task>/NNN_answer.png  the exact answer
      <task>/NNN.json        {"instruction", "category", "task", "mode", "visual_condition",
                              "problem_id", "seed", "n", "W", "H", ...task parameters}
      problems.jsonl         optional index ({"task", "problem_id", "instruction", ...})

or its Hub Parquet snapshot (:mod:`medibench.benchmarks.paintbench.parquet`), read to the same
samples.

Samples: ``sample_id = f"{task}-{NNN}"`` (file-name safe), ``task`` the folder name,
``perspective`` ``modification`` (every PaintBench task asks for a specific change of the
picture), ``instruction`` from the JSON (else from ``problems.jsonl``), ``target`` the answer,
``mask`` none (the edit region is ``any(input != answer)``, computed by the protocol), and in
``metadata``: ``category`` (from the JSON, else PaintBench's task table), ``task``,
``problem_id``, ``mode`` (``"default"`` for a null one, as older generator versions wrote a
single-mode task's), ``visual_condition``, ``seed`` and the other JSON fields, and for a task
with more than one mode ``task_mode`` (``"<task>/<mode>"``, stats.py's mode rows).

``preservation/`` is PaintBench's diagnostic folder (answer = input, no category): its problems
are kept with category ``"diagnostic"`` and scored, and ``paintbench@1`` reports them as a task
of their own, outside every category and the benchmark mean, as PaintBench's evaluator does;
``include_diagnostic=False`` skips them (reported).

Reported in ``problems`` (the adapter keeps going): a problem without its answer image; a JSON
file that cannot be read, is not an object or has a non-string field where text is expected
(skipped); no instruction anywhere (skipped); a task with no category (skipped: it cannot enter
the macro average); a category PaintBench does not define (kept, reported).

Model outputs (PaintBench's ``eval.py``): ``model_outputs/<model>/<benchmark>/<task>/
NNNN_output.png``, where ``NNNN`` is the problem id with **4** digits (inputs have 3) and
``<benchmark>`` the name of this folder (``PaintBench``). See
:meth:`PaintBenchDataset.find_predictions`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medibench.benchmarks.paintbench.parquet import (
    find_shards,
    has_parquet,
    read_rows,
    shard_files,
)
from medibench.benchmarks.paintbench.problems import (
    CATEGORIES,
    DIAGNOSTIC_TASK,
    TASK_CATEGORIES,
    label_modes,
    make_sample,
)
from medibench.datasets._base import DatasetError, read_jsonl
from medibench.datasets._dataset import Dataset, PredictionIndex, select_models
from medibench.samples import Sample

__all__ = [
    "CATEGORIES",
    "PaintBenchDataset",
    "TASK_CATEGORIES",
    "detect",
    "make_sample",
    "read_paintbench",
]

_INPUT = re.compile(r"^(?P<num>\d+)_input\.png$")
_OUTPUT = re.compile(r"^(?P<num>\d+)_output\.png$")


class PaintBenchDataset(Dataset):
    """PaintBench problems (task folders in name order, problems in id order)."""

    default_protocols = ("paintbench@1",)
    expected_k = 1
    #: The benchmark name outputs are filed under when it is not the folder's (a Hub config).
    bench_name: str | None = None

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._by_problem = {(s.task, int(s.metadata["problem_id"])): s.sample_id for s in self}

    @property
    def benchmark_name(self) -> str:
        """The name outputs are filed under: the folder's (``PaintBench``), or the Hub config's."""
        return self.bench_name or self.root.name

    def find_predictions(
        self, folder: str | Path, *, models: Sequence[str] | None = None, model: str | None = None
    ) -> PredictionIndex:
        """Index ``<model>/<benchmark>/<task>/NNNN_output.png`` under ``folder``, k = 0.

        ``folder`` may be ``model_outputs/`` (one sub-folder per model; models without a
        ``<benchmark>`` folder are left out, as PaintBench's eval does), one model's folder
        (holding ``<benchmark>/``), or the ``<benchmark>`` folder of one model (holding task
        folders; the model is ``model`` or the folder above). A model folder holding task folders
        directly is accepted too. Only the official name ``NNNN_output.png``, the problem id with
        4 digits, is an output (what eval.py opens); other ``*_output.png`` names, outputs of
        problems or tasks not in the benchmark go to ``unknown``.
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"predictions folder {folder} does not exist")
        bench_dirs = self._bench_dirs(folder, model)
        bench_dirs = select_models(
            bench_dirs, models, f"no '{self.benchmark_name}' outputs for model(s) {{}} in {folder}"
        )
        index = PredictionIndex()
        for name, bench in bench_dirs.items():
            index.files.setdefault(name, {})
            for task_dir in sorted(p for p in bench.iterdir() if p.is_dir()):
                for path in sorted(task_dir.iterdir()):
                    m = _OUTPUT.match(path.name)
                    if not m or not path.is_file():
                        continue
                    num = m["num"]
                    sid = self._by_problem.get((task_dir.name, int(num)))
                    if sid is None or num != f"{int(num):04d}":
                        index.unknown.append((name, path))
                    else:
                        index.add(name, sid, 0, path)
        return index

    def _bench_dirs(self, folder: Path, model: str | None) -> dict[str, Path]:
        tasks = {s.task for s in self}
        if self._holds_tasks(folder, tasks):
            default = folder.parent.name if folder.name == self.benchmark_name else folder.name
            return {model or default: folder}
        if (folder / self.benchmark_name).is_dir():
            return {model or folder.name: folder / self.benchmark_name}
        found = {}
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
            if sub.name.startswith("."):
                continue
            if (sub / self.benchmark_name).is_dir():
                found[sub.name] = sub / self.benchmark_name
            elif self._holds_tasks(sub, tasks):
                found[sub.name] = sub
        return found

    @staticmethod
    def _holds_tasks(folder: Path, tasks: set[str]) -> bool:
        return any((folder / t).is_dir() for t in tasks)


def read_paintbench(
    path: str | os.PathLike | None = None,
    *,
    name: str | None = None,
    include_diagnostic: bool = True,
    config: str | None = None,
    split: str | None = None,
) -> PaintBenchDataset:
    """Read a PaintBench-layout benchmark folder (module docstring), or its Hub Parquet
    (:mod:`medibench.benchmarks.paintbench.parquet`): a snapshot folder, a config folder in it,
    ``<config folder>/<split>`` (a split by name) or one ``.parquet`` shard; ``config`` and
    ``split`` select one there (default ``PaintBench``, ``test``).

    Returns:
        A :class:`PaintBenchDataset` named ``name`` (default: the folder's name); skipped or
        questionable problems are listed in ``problems``.

    Raises:
        DatasetError: no path, no folder, no task folder with ``NNN_input.png`` files and no
            Parquet, a ``problems.jsonl`` line that is not a JSON object, Parquet without
            PaintBench's columns, a config or split not there.
    """
    if path is None or str(path) == "":
        raise DatasetError("PaintBench needs its folder: use 'paintbench:/path/to/PaintBench'")
    root = Path(path)
    if config is not None or split is not None or not _is_tree(root):
        return _read_parquet(root, name, include_diagnostic, config, split)
    if not _holds_inputs(root):
        root = root / "PaintBench"
    root = root.resolve()
    index = _problem_index(root / "problems.jsonl")
    samples: list[Sample] = []
    problems: list[str] = []
    for task_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        inputs = sorted((m["num"], p) for p in task_dir.iterdir() if (m := _INPUT.match(p.name)))
        if not inputs:
            continue
        task = task_dir.name
        if task == DIAGNOSTIC_TASK and not include_diagnostic:
            problems.append(
                f"{task_dir}: the diagnostic '{DIAGNOSTIC_TASK}' task was left out "
                f"(include_diagnostic=False); {len(inputs)} problems skipped"
            )
            continue
        for num, input_path in inputs:
            sample = _to_sample(task_dir, num, input_path, index, problems)
            if sample is not None:
                samples.append(sample)
    label_modes(samples)
    return PaintBenchDataset(name or root.name, root, samples, problems=problems)


def detect(root: Path) -> bool:
    """Whether ``root`` holds PaintBench task folders (``<task>/NNN_input.png``) or PaintBench's
    Hub Parquet shards."""
    root = Path(root)
    return _is_tree(root) or (root.is_dir() and has_parquet(root))


def _is_tree(root: Path) -> bool:
    """Whether ``root`` (or its ``PaintBench`` sub-folder) holds generated task folders."""
    return _holds_inputs(root) or _holds_inputs(root / "PaintBench")


def _holds_inputs(root: Path) -> bool:
    if not root.is_dir():
        return False
    return any(
        p.is_dir() and any(_INPUT.match(f.name) for f in p.iterdir()) for p in root.iterdir()
    )


def _read_parquet(
    root: Path, name: str | None, include_diagnostic: bool, config: str | None, split: str | None
) -> PaintBenchDataset:
    if not root.exists() and split is None and root.parent.is_dir() and shard_files(root.parent):
        root, split = root.parent, root.name  # <config folder>/<split>: a split by name
    if not root.is_dir() and not (root.is_file() and root.suffix.lower() == ".parquet"):
        raise DatasetError(f"PaintBench folder {root} does not exist or is not a folder")
    if not shard_files(root):
        raise DatasetError(
            f"{root} is not a PaintBench folder: no <task>/NNN_input.png files in its "
            "sub-folders and no Parquet shards"
        )
    root = root.resolve()
    config, split, files = find_shards(root, config=config, split=split)
    snapshot = root.parent if root.is_file() else root
    problems: list[str] = []
    samples = []
    for where, task, num, meta, input_file, answer_file in read_rows(
        files, snapshot=snapshot, include_diagnostic=include_diagnostic,
        problems=problems,
    ):  # fmt: skip
        sample = make_sample(
            task, num, meta, fallback={}, input=input_file, target=answer_file,
            where=(f"{where}, column 'metadata'", where), problems=problems, split=split,
        )  # fmt: skip
        if sample is not None:
            samples.append(sample)
    label_modes(samples)
    default = config if split == "test" else f"{config}-{split}"
    dataset = PaintBenchDataset(name or default, snapshot, samples, problems=problems)
    dataset.bench_name = config
    return dataset


# --- helpers ---------------------------------------------------------------------------------


def _problem_index(path: Path) -> dict[tuple[str, int], dict]:
    if not path.is_file():
        return {}
    found = {}
    for _number, record in read_jsonl(path):
        try:
            found[(str(record["task"]), int(record["problem_id"]))] = record
        except (KeyError, TypeError, ValueError):
            continue  # an index line we cannot key is only a lost fallback
    return found


def _to_sample(
    task_dir: Path,
    num: str,
    input_path: Path,
    index: dict[tuple[str, int], dict],
    problems: list[str],
) -> Sample | None:
    task = task_dir.name
    sid = f"{task}-{num}"
    answer = task_dir / f"{num}_answer.png"
    if not answer.is_file():
        problems.append(f"{task_dir}: problem {num} has no {answer.name}; skipped")
        return None
    meta_path = task_dir / f"{num}.json"
    meta: dict[str, Any] = {}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            problems.append(f"{meta_path}: not valid JSON ({exc}); problem '{sid}' skipped")
            return None
        if not isinstance(meta, dict):
            problems.append(
                f"{meta_path}: expected a JSON object, got {type(meta).__name__}; "
                f"problem '{sid}' skipped"
            )
            return None
    listed = index.get((task, int(num)), {})
    return make_sample(
        task,
        num,
        meta,
        fallback=listed,
        input=str(input_path),
        target=str(answer),
        where=(str(meta_path), str(task_dir)),
        problems=problems,
    )
