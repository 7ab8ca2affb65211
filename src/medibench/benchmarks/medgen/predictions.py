"""Text predictions for ``medibench score``: the official inference's answer records.

The official ``inference.py --mission vqa|generate`` writes the benchmark records plus
``response`` (the text answer), ``raw_response`` and, for generation, ``output_image``. For a
VQA or generation sample, :func:`index_answer_record` stores ``response`` as
``<jsonl folder>/.medibench-answers/<jsonl stem>/<sample_id>_0.txt`` (rewritten when it
changes) with the output image beside it as ``<sample_id>_0.png`` (a symbolic link), and
indexes that text file, which ``medgen@code`` reads as an answer (:mod:`.answers`). An empty
``response`` is a failed output ("the model's answer is empty"), scored ``missing``; a record
with an ``error`` is not an output, as the official resume logic treats it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from medibench.datasets._dataset import PredictionIndex
from medibench.io import atomic_write_text

__all__ = ["ANSWER_CACHE", "EMPTY_ANSWER", "index_answer_record"]

#: The folder, beside an official answers file, holding its answers as text files.
ANSWER_CACHE = ".medibench-answers"
EMPTY_ANSWER = "the model's answer is empty (a failed prediction, not a wrong answer)"


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
    response = record.get("response")
    if record.get("error") or not isinstance(response, str):
        return
    if not response.strip():
        index.add_failed(model, sample_id, 0, EMPTY_ANSWER)
        return
    folder = jsonl.parent / ANSWER_CACHE / jsonl.stem
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
