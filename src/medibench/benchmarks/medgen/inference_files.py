"""The official inference's answer files: ``<model>_<mission>.jsonl`` in a predictions folder.

``inference.py --mission vqa|generate|edit`` writes ``<vlm>_vqa.jsonl``,
``<vlm>_<image model>_generate.jsonl`` and ``<vlm>_<image model>_edit.jsonl``: the benchmark
records plus ``response`` (and ``output_image``). The model is the file name without its
``_<mission>`` suffix (:func:`model_of`). What a folder of them needs from the dataset is the
formats of its records (:func:`formats_in`); :func:`widen_for` loads those that
``medgen:DIR`` did not load by default, or says which option or path loads them. As
``eval.py`` scores one answer file at a time, a model is scored on the samples of its files'
formats only (:func:`file_formats`): a VQA model is not missing every editing sample.

Reading is line by line and forgiving where the official writer can leave damage
(:func:`answer_lines`): a line cut off by a killed inference (or any line that is not a JSON
object) fails only its own sample, named, when its ``sample_id`` can still be read; otherwise
it is a problem naming the file and line. A ``response`` that is neither text nor ``null``
(``42``, ``["B"]``) is an error for that sample (:func:`bad_response`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medibench.benchmarks.medgen._formats import FORMATS
from medibench.benchmarks.medgen._release import release_root
from medibench.io import json_lines

if TYPE_CHECKING:
    from medibench.benchmarks.medgen._dataset import MedGenDataset

__all__ = [
    "MISSIONS",
    "SAMPLE_FORMATS",
    "answer_lines",
    "bad_response",
    "file_formats",
    "formats_in",
    "model_of",
    "widen_for",
]

#: The official missions -> the dataset format their records belong to.
MISSIONS = {"vqa": "vqa", "generate": "gen", "edit": "edit"}
#: A record's ``category`` -> its format.
_CATEGORY = {
    "vqa": "vqa",
    "mmgeneration": "gen",
    "multimodalgeneration": "gen",
    "imageedit": "edit",
}
_CATEGORY["imageediting"] = "edit"
#: A format -> the ``metadata["format"]`` of its samples.
SAMPLE_FORMATS = {"edit": "ImageEditing", "vqa": "VQA", "gen": "MultimodalGeneration"}
_FORMAT_NAMES = {"edit": "image-editing", "vqa": "VQA", "gen": "generation"}
_SAMPLE_ID = re.compile(r'"sample_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def model_of(jsonl: Path) -> str:
    """The model an answer file is of: its name without ``_vqa`` / ``_generate`` / ``_edit``."""
    stem = jsonl.stem
    for mission in MISSIONS:
        suffix = f"_{mission}"
        if stem.endswith(suffix) and len(stem) > len(suffix):
            return stem[: -len(suffix)]
    return stem


def answer_lines(jsonl: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None, str]]:
    """``(line number, record, sample_id or None, problem)`` of each non-blank line: the record
    with an empty problem, or ``None`` with what is wrong (and the ``sample_id`` still legible
    in the broken text, if any)."""
    with open(jsonl, encoding="utf-8", errors="replace") as fh:
        for number, line, record, exc in json_lines(fh):
            if exc is not None:
                found = _SAMPLE_ID.search(line)
                cut = "" if line.endswith("\n") else " (cut off: a killed inference leaves this)"
                problem = f"{jsonl} line {number}: not valid JSON{cut}: {exc.msg}"
                yield number, None, _unescape(found.group(1)) if found else None, problem
                continue
            if not isinstance(record, dict):
                kind = type(record).__name__
                yield (
                    number,
                    None,
                    None,
                    f"{jsonl} line {number}: expected a JSON object, got {kind}",
                )
                continue
            yield number, record, str(record.get("sample_id") or "") or None, ""


def bad_response(record: dict[str, Any], jsonl: Path, number: int) -> str | None:
    """Why a record's ``response`` cannot be an answer (not text and not ``null``), or ``None``."""
    response = record.get("response")
    if response is None or isinstance(response, str):
        return None
    shown = f"{type(response).__name__} {json.dumps(response)[:60]}"
    return (
        f"{jsonl} line {number}: response is {shown}, not text (the official code would score "
        "its str() form; medibench refuses it)"
    )


def formats_in(folder: Path) -> dict[str, list[Path]]:
    """``{format: [answer files]}`` of the official answer files in ``folder`` (and its model
    sub-folders): each file's formats from its records' ``category``, else from its mission."""
    files = sorted(p for p in folder.glob("*.jsonl") if p.is_file())
    if not files:
        for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
            files += sorted(p for p in sub.glob("*.jsonl") if p.is_file())
    found: dict[str, list[Path]] = {}
    for path in files:
        for fmt in file_formats(path):
            found.setdefault(fmt, []).append(path)
    return found


def widen_for(dataset: MedGenDataset, folder: Path) -> tuple[MedGenDataset, list[str]]:
    """``dataset`` with the formats the answer files in ``folder`` need, and what was done or
    what the user must do, one line each.

    A dataset loaded by default (``medgen:DIR``) is re-read with the needed formats that its
    folder or release holds; one whose formats were chosen (a format's own path, or
    ``--dataset-option formats=...``) is kept, and each file of another format is named with
    the option that loads it. A format the folder does not hold is named with the file it needs.
    """
    needed = formats_in(Path(folder))
    extra = [f for f in FORMATS if f in needed and f not in dataset.formats]
    if not extra:
        return dataset, []
    said: list[str] = []
    available = [f for f in extra if _holds(dataset.root, f)]
    for fmt in extra:
        files = ", ".join(p.name for p in needed[fmt][:3])
        kind = _FORMAT_NAMES[fmt]
        if fmt not in available:
            file, config = FORMATS[fmt]
            said.append(
                f"{files} hold {kind} answers, but {dataset.root} has no {file} or "
                f"parquet/{config}/: give the folder that has them (medgen:DIR/{file}) and "
                f"--dataset-option formats=[{','.join((*dataset.formats, fmt))}]"
            )
        elif dataset.formats_chosen:
            want = ",".join(f for f in FORMATS if f in (*dataset.formats, fmt))
            said.append(
                f"{files} hold {kind} answers, which this dataset does not load: add "
                f"--dataset-option formats=[{want}] (or formats=all) to score them"
            )
    if dataset.formats_chosen or not available:
        return dataset, said
    wanted = tuple(f for f in FORMATS if f in (*dataset.formats, *available))
    widened = type(dataset).from_formats(dataset.root, wanted, dataset.name)
    widened.default_protocols = dataset.default_protocols
    widened.notes = list(getattr(dataset, "notes", ()))
    names = ", ".join(_FORMAT_NAMES[f] for f in available)
    said.insert(0, f"loaded the {names} records too: {folder} holds answers for them")
    return widened, said


# -- helpers ----------------------------------------------------------------------------------
def file_formats(path: Path) -> list[str]:
    """The formats of an answer file: its records' ``category``, else its mission's."""
    found: list[str] = []
    for _, record, _, _ in answer_lines(path):
        if record is None:
            continue
        key = str(record.get("category") or "").replace(" ", "").replace("_", "").lower()
        fmt = _CATEGORY.get(key)
        if fmt and fmt not in found:
            found.append(fmt)
    if not found:
        stem = path.stem
        found = [f for m, f in MISSIONS.items() if stem.endswith(f"_{m}")]
    return found


def _holds(root: Path, fmt: str) -> bool:
    file, config = FORMATS[fmt]
    release = release_root(root) or root
    return (root / file).is_file() or (release / "parquet" / config).is_dir()


def _unescape(text: str) -> str:
    try:
        return json.loads(f'"{text}"')
    except json.JSONDecodeError:
        return text
