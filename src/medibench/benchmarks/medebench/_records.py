"""MedEBench metadata records as samples, and the dataset that holds them (the field rules are
in :mod:`medibench.benchmarks.medebench.dataset`, which reads the metadata JSON;
:mod:`.parquet` reads the same records from a Parquet conversion).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medibench.benchmarks.medebench._fields import (
    infer_modality,
    normalize_region,
    rephrasing_looks_truncated,
    task_perspective,
)
from medibench.datasets._base import DatasetError, resolve_inside
from medibench.datasets._dataset import Dataset, PredictionIndex
from medibench.samples import RecordError, Sample

__all__ = ["LICENCE", "MedEBenchDataset"]

#: Licence of the MedEBench data.
LICENCE = "CC BY-NC 4.0"

_REQUIRED = ("id", "Organ", "Task", "prompt", "previous_image", "changed_image")
_TEXT_FIELDS = ("Organ", "Task", "prompt", "rephrased_prompt", "detailed_prompt", "url")
_PATH_FIELDS = ("previous_image", "changed_image", "previous_mask")


class MedEBenchDataset(Dataset):
    """MedEBench samples in metadata order, with absolute image paths.

    Predictions follow the official layout ``generated_images/<model>/<id>_<k>.png``; the
    official scripts score only ``k = 0`` (``expected_k = 1``).
    """

    default_protocols = ("medebench@paper", "medebench@1")
    expected_k = 1

    def find_predictions(
        self, folder: str | Path, *, models: Sequence[str] | None = None, model: str | None = None
    ) -> PredictionIndex:
        """Index ``<model>/<id>_<k>.png`` under ``folder``: the ``generated_images/`` folder
        (one sub-folder per model), the repository root that holds it, or one model's folder.

        Every k is indexed; the official scripts score only ``<id>_0.png``, which
        ``expected_k = 1`` tells the scorer. Files whose id is not a sample id go to ``unknown``.
        """
        folder = Path(folder)
        if (folder / "generated_images").is_dir() and (folder / "editing").is_dir():
            folder = folder / "generated_images"
        return super().find_predictions(folder, models=models, model=model)


def _to_sample(record: Any, where: str, root: Path, problems: list[str]) -> Sample | None:
    """One metadata record as a Sample, or None (with a problem line) when it is skipped."""
    if not isinstance(record, dict):
        problems.append(f"{where}: not an object ({type(record).__name__}); skipped")
        return None
    raw_id = record.get("id")
    sid = str(raw_id) if isinstance(raw_id, (int, str)) and not isinstance(raw_id, bool) else None
    who = f"{where} (id {sid})" if sid else where
    missing = [f for f in _REQUIRED if record.get(f) in (None, "")]
    if missing:
        problems.append(f"{who}: missing required field(s) {', '.join(missing)}; skipped")
        return None
    wrong = [
        f
        for f in (*_TEXT_FIELDS, *_PATH_FIELDS)
        if record.get(f) is not None and not isinstance(record[f], str)
    ]
    if sid is None or wrong:
        what = ", ".join(wrong) if sid is not None else "id (not an integer or string)"
        problems.append(f"{who}: field(s) {what} of the wrong type; skipped")
        return None

    paths: dict[str, Path | None] = {}
    for field in _PATH_FIELDS:
        value = record.get(field)
        if value in (None, ""):
            paths[field] = None
            continue
        try:
            paths[field] = resolve_inside(root, value, what=f"{who}, field '{field}'")
        except DatasetError as exc:
            problems.append(f"{exc}; sample refused")
            return None
    previous = paths["previous_image"]
    if previous is None or not previous.is_file():
        problems.append(f"{who}: input image '{record['previous_image']}' not found; skipped")
        return None
    for field, label in (("changed_image", "ground-truth image"), ("previous_mask", "mask")):
        path = paths[field]
        if path is None:
            problems.append(f"{who}: no {field}; {label} left out (scored where it can be)")
        elif not path.is_file():
            problems.append(
                f"{who}: {label} '{record[field]}' not found; left out (scored where it can be)"
            )
            paths[field] = None

    organ = record["Organ"].strip()
    region = normalize_region(organ)
    if region is None:
        problems.append(f"{who}: unknown Organ {organ!r} (not one of the 13 regions); kept as is")
        region = organ
    prompt = record["prompt"].strip()
    rephrased = (record.get("rephrased_prompt") or "").strip()
    perspective, rule = task_perspective(record["Task"])
    metadata: dict[str, Any] = {"id": raw_id, "organ": organ, "perspective_rule": rule}
    paraphrases: tuple[str, ...] = ()
    if rephrased:
        metadata["rephrased_is_prompt"] = rephrased == prompt
        metadata["rephrased_truncated"] = rephrased != prompt and rephrasing_looks_truncated(
            rephrased, prompt
        )
        if rephrased != prompt:
            paraphrases = (rephrased,)
    description = (record.get("detailed_prompt") or "").strip() or None
    try:
        return Sample(
            sample_id=sid,
            benchmark="medebench",
            input=str(paths["previous_image"]),
            target=None if paths["changed_image"] is None else str(paths["changed_image"]),
            mask=None if paths["previous_mask"] is None else str(paths["previous_mask"]),
            instruction=prompt,
            paraphrases=paraphrases,
            description=description,
            region=region,
            task=record["Task"].strip(),
            modality=infer_modality(description),
            perspective=perspective,
            source={"dataset": "MedEBench", "licence": LICENCE, "url": record.get("url") or ""},
            metadata=metadata,
        )
    except RecordError as exc:
        problems.append(f"{who}: {exc}; skipped")
        return None
