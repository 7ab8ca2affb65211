"""MedGEN-Bench (docs/protocols.md): the image-editing records of its evaluation view.

The folder is the one the official ``eval.py --data_path`` points at (made by the official
``prepare_medgen_data.py``)::

    root/
      edit.jsonl          one JSON object per line: the image-editing records (3,872)
      vqa.jsonl gen.jsonl optional: read and kept in ``dataset.other_records`` (not samples)
      source/...          images; the official preparation makes ``source`` a symbolic link to
                          the raw dataset, so links inside the folder are followed

A record has ``category`` (``ImageEdit`` here), ``paper_task``, ``instruction``,
``input_image`` / ``input_images``, ``ground_truth_image`` / ``ground_truth_images``, ``answer``
(a string or a dict of report sections), ``choice``, ``modality`` and ``sample_id``
(``medgen:ImageEditing:<task>:<line>``). Image fields may be a path string or a list of paths:
the singular field wins; from a list the first path is used and the others are kept, absolute,
in ``metadata["extra_input_images"]`` / ``metadata["extra_ground_truth_images"]``. Paths are
relative to the folder (``..`` out of it is refused); an absolute path is read where it
points, as the official code's ``resolve_image_path`` reads it (its own tests write them).

Samples: ``sample_id`` is the record's id made file-name safe (``:`` and the other characters a
file name cannot hold become ``-``; the original is ``metadata["medgen_sample_id"]``), ``task``
the paper task (lower case, ``_`` as ``-``, the official aliases such as ``dye-transfer`` ->
``style-transfer`` resolved), ``perspective`` from :data:`PERSPECTIVES`, ``target`` the ground
truth, ``mask`` none, ``description`` the answer text.

What is reported in ``problems`` (the adapter keeps going):

* a record without ``sample_id``, ``instruction``, a task, an input or a ground-truth image, or
  whose image file is missing or whose path is refused: skipped;
* a record of another category (``VQA``...) or a known non-editing task: skipped;
* an unknown task: **kept** as a ``modification`` sample (an editing record the table does not
  know is still an edit to score), with ``metadata["unknown_task"] = True``;
* a duplicate id: the later record is skipped.

A line that is not JSON, or not a JSON object, is a :class:`DatasetError` naming the file and
line.

Model outputs: the official inference writes ``<vlm>_vqa.jsonl``,
``<vlm>_<image model>_generate.jsonl`` and ``<vlm>_<image model>_edit.jsonl``, the benchmark
records plus ``response`` and ``output_image`` (:mod:`.inference_files`);
:meth:`MedGenDataset.find_predictions` reads those files, and also medibench's own
``<model>/<sample_id>_<k>.png`` / ``.txt``; :meth:`MedGenDataset.for_predictions` loads the
formats a folder of answer files needs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from medibench.benchmarks.medgen._dataset import MedGenDataset
from medibench.benchmarks.medgen._edit_samples import _to_sample
from medibench.benchmarks.medgen._formats import EDIT_FILE
from medibench.benchmarks.medgen.formats import read_formats, select_formats
from medibench.benchmarks.medgen.parquet import read_release, release_root
from medibench.benchmarks.medgen.tasks import PERSPECTIVES, normalize_task
from medibench.datasets._base import DatasetError, collect_samples, read_jsonl

__all__ = [
    "EDIT_FILE",
    "MedGenDataset",
    "PERSPECTIVES",
    "detect",
    "normalize_task",
    "read_medgen",
]

_OTHER_FILES = {"vqa": "vqa.jsonl", "gen": "gen.jsonl"}


def read_medgen(
    path: str | os.PathLike | None = None,
    *,
    name: str = "medgen",
    formats: str | Sequence[str] | None = None,
) -> MedGenDataset:
    """Read MedGEN-Bench's evaluation folder (the one holding ``edit.jsonl``) or its Parquet
    release (``parquet/image_editing/*.parquet``, read by :mod:`.parquet`).

    The editing records by default; a path to ``vqa.jsonl`` / ``gen.jsonl`` (or the release's
    ``parquet/vqa`` / ``parquet/multimodal_generation``) or ``formats`` (``"all"``, or keys
    ``edit``, ``vqa``, ``gen``) loads those formats instead (:mod:`.formats`, :mod:`.records`).

    Returns:
        A :class:`MedGenDataset`; skipped or questionable records are listed in ``problems``.

    Raises:
        DatasetError: no path, no folder, no ``edit.jsonl``, a line of one of the JSONL files
            that is not a JSON object (the message names the file and line), no editing sample
            in ``edit.jsonl`` (empty, or every record skipped: the first problems are named).
    """
    if path is None or str(path) == "":
        raise DatasetError("MedGEN-Bench needs its folder: use 'medgen:/path/to/MedGEN_data'")
    root, picked = select_formats(Path(path))
    if formats is not None or picked is not None:
        if not root.is_dir():
            raise DatasetError(f"MedGEN-Bench folder {root} does not exist or is not a folder")
        return read_formats(root, formats or picked or (), name)
    if not root.is_dir():
        raise DatasetError(f"MedGEN-Bench folder {root} does not exist or is not a folder")
    if not (root / EDIT_FILE).is_file():
        release = release_root(root.absolute())
        if release is None:
            raise DatasetError(
                f"{root} is not a MedGEN-Bench folder: it has no {EDIT_FILE} and no "
                "parquet/image_editing/*.parquet"
            )
        return read_release(release, name)
    root = root.absolute()
    problems: list[str] = []
    edit = root / EDIT_FILE
    samples = collect_samples(
        ((f"{edit} line {n}", f"line {n}", record) for n, record in read_jsonl(edit)),
        lambda record, where: _to_sample(record, where, root, problems),
        problems,
        source=edit,
        duplicate=lambda s, first: (
            f"sample '{s.metadata['medgen_sample_id']}' has the same id as {first}"
        ),
    )
    other = {
        key: [record for _, record in read_jsonl(root / file)]
        for key, file in _OTHER_FILES.items()
        if (root / file).is_file()
    }
    return MedGenDataset(name, root, samples, problems=problems, other_records=other)


def detect(root: Path) -> bool:
    """Whether ``root`` is a MedGEN-Bench folder: ``edit.jsonl`` or the Parquet release."""
    return (Path(root) / EDIT_FILE).is_file() or release_root(Path(root).absolute()) is not None


# --- helpers ---------------------------------------------------------------------------------


