"""Text predictions for ``medibench score``: the official inference's answer records.

The official ``inference.py --mission vqa|generate`` writes the benchmark records plus
``response`` (the text answer), ``raw_response`` and, for generation, ``output_image``. For a
VQA or generation sample, :func:`index_answer_record` stores ``response`` as
``<jsonl folder>/.medibench-answers/<jsonl stem>/<sample_id>_0.txt`` (rewritten when it
changes) with the output image beside it as ``<sample_id>_0.png`` (a symbolic link), and
indexes that text file, which the protocols read as an answer (:mod:`.answers`). An empty,
whitespace or ``null`` response is stored as it is (empty text): ``medgen@code`` scores it as
the code does, ``medgen@1`` counts it as a failed prediction. A record with an ``error`` is not
an output, as the official resume logic treats it. A response of another type, or a line that
cannot be read, is an error for its sample: :func:`index_answer_error` stores the reason as
``<sample_id>_0.error``, which the protocols raise when they read it (status ``error``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from medibench.datasets._dataset import PredictionIndex
from medibench.io import atomic_write_text

__all__ = ["ANSWER_CACHE", "index_answer_error", "index_answer_record", "read_answer_error"]

#: The folder, beside an official answers file, holding its answers as text files.
ANSWER_CACHE = ".medibench-answers"


def index_answer_record(
    index: PredictionIndex,
    model: str,
    sample_id: str,
    record: dict[str, Any],
    jsonl: Path,
    find_image: Any,
) -> None:
    """Index one official answer record of ``sample_id`` (module docstring); ``find_image(ref)``
    resolves an ``output_image`` reference to a path."""
    if record.get("error"):
        return
    response = record.get("response")
    response = "" if response is None else str(response)
    folder = jsonl.parent / ANSWER_CACHE / jsonl.stem
    (folder / f"{sample_id}_0.error").unlink(missing_ok=True)
    text = folder / f"{sample_id}_0.txt"
    if not text.is_file() or text.read_text(encoding="utf-8") != response:
        atomic_write_text(text, response)
    link = text.with_suffix(".png")
    ref = record.get("output_image")
    if isinstance(ref, str) and ref.strip():
        image = Path(find_image(ref)).absolute()
        if link.is_symlink() or link.exists():
            if link.is_symlink() and Path(os.readlink(link)) == image:
                index.add(model, sample_id, 0, text)
                return
            link.unlink()
        link.symlink_to(image)
    elif link.is_symlink():
        link.unlink()
    index.add(model, sample_id, 0, text)


def index_answer_error(
    index: PredictionIndex, model: str, sample_id: str, jsonl: Path, reason: str
) -> None:
    """Index ``sample_id``'s answer in ``jsonl`` as an error (module docstring): the reason is
    stored beside the answers and raised by :func:`read_answer_error` when scored."""
    path = jsonl.parent / ANSWER_CACHE / jsonl.stem / f"{sample_id}_0.error"
    if not path.is_file() or path.read_text(encoding="utf-8") != reason:
        atomic_write_text(path, reason)
    index.add(model, sample_id, 0, path)


def read_answer_error(path: Path) -> None:
    """Raise the ``ValueError`` stored by :func:`index_answer_error` at ``path``."""
    raise ValueError(Path(path).read_text(encoding="utf-8"))
