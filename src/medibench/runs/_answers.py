"""The generate stage for answering models: text (and image) predictions beside image ones.

A model with ``answer`` (a :class:`~medibench.models.vlm.VLM`) or ``generate`` (a
:class:`~medibench.models.vlm.Generator`: unified models, compositional systems) answers each
(sample, k) instead of editing: it is shown every input image of the sample
(``metadata["input_images"]``, else ``input``; the contact sheet for one-image models) and the
prompt of :func:`answer_prompt`; a generator is asked for an image when the sample expects one
(``metadata["expected"]["images"]`` or a ``target``).

What is written, per item, after its files are atomically in place:

* ``outputs/<model folder>/<sample_id>_<k>.txt``: the text answer; ``..._<k>.png``: the image;
* the ``predictions`` row (``path`` = the PNG when there is an image, else the text file), so
  the score and judge stages find it as they find edited images;
* a row of the table :data:`ANSWER_TABLE` (declared through ``RunStore.declare_table``): the
  text, both paths, the prompt, how many images were shown (and whether as a contact sheet),
  and the calls that made the answer (a compositional system's VLM and editor calls) as JSON.

An empty text answer (only whitespace) is a **failed prediction** ("the model's answer is
empty"), not a wrong answer; a refusal is ``refused``, as for edits.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console

from medibench._identity import output_folder
from medibench._progress import progress_bar
from medibench.calls._redact import redact, redact_value
from medibench.io import read_image, write_image
from medibench.io._write import atomic_write_text, is_disk_full
from medibench.runs._icl import answer_prompt
from medibench.runs._store import RunStore
from medibench.runs._work import Task, check_output, failure
from medibench.samples import Prediction, Sample

if TYPE_CHECKING:
    from medibench.runs._runner import StageReport

__all__ = ["ANSWER_TABLE", "answer_prompt", "declare_answers", "generate_answers", "read_answers"]

#: The run-store table of text predictions.
ANSWER_TABLE = "answers"
_COLUMNS = (
    "model TEXT NOT NULL, sample_id TEXT NOT NULL, k INTEGER NOT NULL, text TEXT, "
    "text_path TEXT, image_path TEXT, prompt TEXT, images_shown INTEGER, contact_sheet INTEGER, "
    "calls TEXT, created REAL, PRIMARY KEY (model, sample_id, k)"
)


def declare_answers(store: RunStore) -> None:
    """Declare :data:`ANSWER_TABLE` in ``store`` (idempotent)."""
    store.declare_table(ANSWER_TABLE, _COLUMNS, ("model", "sample_id", "k"), stage="generate")


def wants_image(sample: Sample) -> bool:
    """Whether the sample's expected output includes an image."""
    expected = sample.metadata.get("expected") or {}
    return bool(expected.get("images")) or sample.target is not None


def generate_answers(
    store: RunStore,
    tasks: Sequence[Task],
    model: Any,
    model_name: str,
    report: StageReport,
    progress: bool = True,
    console: Console | None = None,
    workers: int | None = None,
) -> StageReport:
    """Answer ``tasks`` (the items :func:`~medibench.runs.generate` chose; module docstring)
    and count them in ``report``.

    ``workers`` items are answered at once (default: the model's ``concurrency``, else 1), on
    threads; this thread writes every row, one transaction per item."""
    declare_answers(store)
    out_dir = store.run_dir / "outputs" / output_folder(model_name)
    workers = max(1, int(workers or getattr(model, "concurrency", 1) or 1))

    def one(task: Task) -> tuple[dict[str, Any], str | None, float]:
        t0 = time.perf_counter()
        row, error = _answer_one(model, task.sample, task.k, task.seed, out_dir, task.demos)
        return row, error, time.perf_counter() - t0

    with (
        progress_bar(progress, console, f"answer {model_name}", len(tasks)) as advance,
        ThreadPoolExecutor(workers, thread_name_prefix="medibench-answer") as pool,
    ):
        futures = {pool.submit(one, task): task for task in tasks}
        for future in as_completed(futures):  # this thread writes every row
            task, (row, error, elapsed) = futures[future], future.result()
            sample_id = task.sample.sample_id
            status = report.count(f"{sample_id}_{task.k}", error)
            rel = _relative(store, row.get("image_path") or row.get("text_path"))
            pred = Prediction(
                sample_id=sample_id,
                model=model_name,
                k=task.k,
                path=rel if status == "ok" else None,
                seed=task.seed,
                status=status,
                error=error,
                elapsed_s=elapsed,
            )
            _put(store, model_name, sample_id, task.k, row)
            store.put_prediction(pred)
            advance()
    return report


def read_answers(store: RunStore, model: str | None = None) -> dict[tuple[str, str, int], dict]:
    """``(model, sample_id, k) -> row`` of :data:`ANSWER_TABLE` (``calls`` decoded)."""
    out = {}
    for row in store.records(ANSWER_TABLE):
        if model is None or row["model"] == model:
            row["calls"] = json.loads(row["calls"]) if row.get("calls") else []
            out[(row["model"], row["sample_id"], row["k"])] = row
    return out


# -- helpers ----------------------------------------------------------------------------------
def _answer_one(
    model: Any, sample: Sample, k: int, seed: int, out_dir: Path, demos: Sequence[Sample] = ()
) -> tuple[dict[str, Any], str | None]:
    prompt = answer_prompt(sample)
    row: dict[str, Any] = {"prompt": prompt, "calls": []}
    try:
        paths = list(sample.metadata.get("input_images") or [sample.input])
        images = [read_image(p, mode="rgb") for p in paths]
        limit = getattr(model, "max_images", None)
        row["images_shown"] = len(images)
        row["contact_sheet"] = int(limit is not None and len(images) > int(limit))
        image: np.ndarray | None = None
        examples = _examples(demos)  # in-context demonstrations (medibench.runs._icl)
        if callable(getattr(model, "generate", None)):
            want = wants_image(sample)
            made = (
                model.generate_with_examples(images, prompt, examples, seed=seed, want_image=want)
                if examples
                else model.generate(images, prompt, seed=seed, want_image=want)
            )
            text, image, row["calls"] = made.text, made.image, list(made.calls)
        else:
            text = (
                model.answer_with_examples(images, prompt, examples, seed=seed)
                if examples
                else model.answer(images, prompt, seed=seed)
            )
            row["calls"] = [{"role": "vlm", "model": model.name, "prompt": prompt, "answer": text}]
            if examples:
                row["calls"][0]["examples"] = [ex.sample_id for ex in examples]
        if not isinstance(text, str):
            raise TypeError(f"the model answered {type(text).__name__}, not text")
        # a server may echo the key in an answer: nothing stored or scored may hold it
        text, row["calls"] = redact(text), redact_value(row["calls"])
        row["text"] = text
        if not text.strip():
            return row, "the model's answer is empty (a failed prediction, not a wrong answer)"
        stem = out_dir / f"{sample.sample_id}_{k}"
        row["text_path"] = str(atomic_write_text(stem.with_suffix(".txt"), text))
        if image is not None:
            row["image_path"] = str(write_image(stem.with_suffix(".png"), check_output(image)))
    except Exception as exc:
        if is_disk_full(exc):
            raise
        return row, failure(exc)
    return row, None


def _examples(demos: Sequence[Sample]) -> list[Any]:
    if not demos:
        return []
    from medibench.runs._demos import load_examples

    return load_examples(demos, "answer")


def _relative(store: RunStore, path: str | None) -> str | None:
    if not path:
        return None
    p = Path(path)
    return str(p.relative_to(store.run_dir)) if p.is_relative_to(store.run_dir) else str(p)


def _put(store: RunStore, model: str, sample_id: str, k: int, row: dict[str, Any]) -> None:
    values = redact_value(
        (
            model,
            sample_id,
            k,
            row.get("text"),
            _relative(store, row.get("text_path")),
            _relative(store, row.get("image_path")),
            row.get("prompt"),
            row.get("images_shown"),
            row.get("contact_sheet"),
            json.dumps(row.get("calls") or [], default=str),
            time.time(),
        )
    )
    with store.transaction():
        store.connection.execute(
            f"INSERT OR REPLACE INTO {ANSWER_TABLE} VALUES ({', '.join('?' * len(values))})",
            values,
        )
