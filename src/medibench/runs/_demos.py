"""What each prediction is shown: in-context demonstrations attached to the generate tasks,
stored in the run-store table :data:`DEMO_TABLE` before the prediction rows, and read back as
:class:`~medibench.models._examples.Demonstration` records for the model (the choice itself:
:mod:`medibench.runs._icl`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from medibench.runs._icl import (
    TOO_FEW,
    DemonstrationError,
    IclEntry,
    answer_prompt,
    expected_answer,
)
from medibench.runs._store import RunStore
from medibench.samples import Sample

__all__ = [
    "DEMO_TABLE",
    "attach_demonstrations",
    "load_examples",
    "read_demonstrations",
    "record_demonstrations",
]

#: The run-store table of what each prediction was shown.
DEMO_TABLE = "demonstrations"
_COLUMNS = (
    "model TEXT NOT NULL, sample_id TEXT NOT NULL, k INTEGER NOT NULL, icl_k INTEGER NOT NULL, "
    "demo_ids TEXT NOT NULL, images_sent INTEGER NOT NULL, template TEXT, template_sha256 TEXT, "
    "fallback TEXT, PRIMARY KEY (model, sample_id, k)"
)


def load_examples(demos: Sequence[Sample], needs: str = "target") -> list[Any]:
    """Read ``demos`` into :class:`~medibench.models._examples.Demonstration` records (images
    as uint8 RGB): for editors the input and the target; for answering models every input image,
    the prompt and the expected answer."""
    from medibench.io import read_image
    from medibench.models._examples import Demonstration

    out = []
    for s in demos:
        if needs == "target":
            if s.target is None:
                raise DemonstrationError(f"demonstration {s.sample_id!r} has no target image")
            image = read_image(s.input, mode="rgb")
            out.append(
                Demonstration(
                    s.sample_id, (image,), s.instruction, read_image(s.target, mode="rgb")
                )
            )
            continue
        paths = list(s.metadata.get("input_images") or [s.input])
        images = tuple(read_image(p, mode="rgb") for p in paths)
        out.append(Demonstration(s.sample_id, images, answer_prompt(s), answer=expected_answer(s)))
    return out


def attach_demonstrations(
    store: RunStore, tasks: Sequence[Any], entry: IclEntry, model: str, report: Any
) -> list[Any]:
    """``tasks`` with their demonstrations chosen (``Task.demos``) and stored
    (:func:`record_demonstrations`). A task with fewer eligible candidates than K takes the
    plan's fallback, counted in ``report`` (a :class:`~medibench.runs.StageReport`); one the
    fallback does not make is stored with the status :data:`~medibench.runs._icl.TOO_FEW`
    (another demonstration error: ``error``) and left out."""
    import dataclasses

    from medibench.runs._icl import TooFewDemonstrations
    from medibench.samples import Prediction

    out = []
    for task in tasks:
        sample = task.sample
        try:
            demos, fallback = entry.choose(sample, task.k)
        except DemonstrationError as exc:
            too_few = isinstance(exc, TooFewDemonstrations)
            error = f"{type(exc).__name__}: {exc}"
            if too_few:
                report.short_of_demos(entry.k, entry.plan.fallback, error)
            else:
                report.count(f"{sample.sample_id}_{task.k}", error)
            store.put_prediction(
                Prediction(
                    sample_id=sample.sample_id,
                    model=model,
                    k=task.k,
                    seed=task.seed,
                    status=TOO_FEW if too_few else "error",
                    error=error,
                )
            )
            continue
        if fallback is not None:
            report.short_of_demos(entry.k, fallback)
        report.pixel_copies += entry.plan.pixel_copies(sample) > 0
        sent = entry.images_sent(sample, demos)
        record_demonstrations(store, model, sample.sample_id, task.k, demos, sent, fallback)
        out.append(dataclasses.replace(task, demos=demos))
    return out


def record_demonstrations(
    store: RunStore,
    model: str,
    sample_id: str,
    k: int,
    demos: Sequence[Sample],
    images_sent: int,
    fallback: str | None = None,
) -> None:
    """Store what prediction (``model``, ``sample_id``, ``k``) was shown (the demonstrations'
    ids in order, the images its request carried, the template, the fallback it took when
    fewer than K were eligible), before its row."""
    from medibench.models._examples import load_template

    store.declare_table(DEMO_TABLE, _COLUMNS, ("model", "sample_id", "k"), stage="generate")
    tpl = load_template()
    ids = json.dumps([s.sample_id for s in demos])
    values = (model, sample_id, k, len(demos), ids, images_sent, tpl.name, tpl.sha256, fallback)
    with store.transaction():
        store.connection.execute(
            f"INSERT OR REPLACE INTO {DEMO_TABLE} VALUES ({', '.join('?' * len(values))})", values
        )


def read_demonstrations(store: RunStore) -> dict[tuple[str, str, int], dict[str, Any]]:
    """``(model, sample_id, k) -> row`` of :data:`DEMO_TABLE` (``demo_ids`` decoded); empty
    when the run showed none."""
    out = {}
    for row in store.records(DEMO_TABLE):
        row["demo_ids"] = json.loads(row["demo_ids"])
        out[(row["model"], row["sample_id"], int(row["k"]))] = row
    return out
