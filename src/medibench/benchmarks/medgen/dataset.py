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
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medibench.benchmarks.medgen.inference_files import (
    answer_lines,
    bad_response,
    model_of,
    widen_for,
)
from medibench.benchmarks.medgen.predictions import index_answer_error, index_answer_record
from medibench.benchmarks.medgen.tasks import PERSPECTIVES, is_editing_task, normalize_task
from medibench.datasets._base import DatasetError, collect_samples, read_jsonl
from medibench.datasets._dataset import (
    Dataset,
    PredictionIndex,
    index_predictions,
    select_models,
)
from medibench.samples import Perspective, Sample

__all__ = [
    "EDIT_FILE",
    "MedGenDataset",
    "PERSPECTIVES",
    "detect",
    "normalize_task",
    "read_medgen",
]

EDIT_FILE = "edit.jsonl"
_OTHER_FILES = {"vqa": "vqa.jsonl", "gen": "gen.jsonl"}

_EDIT_CATEGORIES = frozenset({"imageedit", "imageediting"})
_UNSAFE = re.compile(r'[/\\:*?"<>|\s]')
# What the official agent writes as output_image when an edit fails ("Edit Error: <message>").
_EDIT_ERROR = re.compile(r"^\s*edit error\b", re.IGNORECASE)


class MedGenDataset(Dataset):
    """MedGEN-Bench editing samples in ``edit.jsonl`` order, with absolute image paths.

    Attributes:
        other_records: ``{"vqa": [...], "gen": [...]}``, the records of ``vqa.jsonl`` and
            ``gen.jsonl`` when present, as read (they are not editing samples).
        formats: the formats loaded as samples (keys of :data:`.formats.FORMATS`).
        formats_chosen: whether the user chose them (a format's path or ``formats=``), rather
            than ``medgen:DIR``'s default (the editing records).
    """

    default_protocols = ("medgen@code", "medgen@1")
    expected_k = 1
    #: medibench's outputs: ``<sample_id>_<k>.png``, and ``.txt`` for a text answer.
    prediction_pattern = re.compile(r"^(?P<sid>.+)_(?P<k>\d+)\.(?:png|txt)$")

    def __init__(
        self,
        *args: Any,
        other_records: dict[str, list[dict]] | None = None,
        formats: tuple[str, ...] = ("edit",),
        formats_chosen: bool = False,
        **kw: Any,
    ):
        super().__init__(*args, **kw)
        self.other_records = other_records or {}
        self.formats, self.formats_chosen = tuple(formats), formats_chosen
        # The official ids contain ':'; outputs may name either form.
        self._id_of = {
            s.metadata["medgen_sample_id"]: s.sample_id
            for s in self
            if "medgen_sample_id" in s.metadata
        }

    def for_predictions(self, folder: str | Path) -> tuple[MedGenDataset, list[str]]:
        """This dataset with the formats the official answer files in ``folder`` need, and
        what was done or what to do (:func:`.inference_files.widen_for`)."""
        return widen_for(self, Path(folder))

    def find_predictions(
        self, folder: str | Path, *, models: Sequence[str] | None = None, model: str | None = None
    ) -> PredictionIndex:
        """Index model outputs in ``folder``.

        Accepted layouts:

        * the official inference folder: ``<model>_vqa.jsonl``, ``<model>_generate.jsonl``,
          ``<model>_edit.jsonl`` files (the model is the name without the mission; files of one
          model are read together; ``model`` renames a single model);
        * one sub-folder per model holding such a JSONL file and/or medibench's
          ``<sample_id>_<k>.png`` files (either id form);
        * one model's folder (PNG or JSONL files directly in it), named ``model`` or the folder.

        From a JSONL file, a record with an ``error`` or without ``output_image`` is not an
        output (as the official resume logic treats it); an ``output_image`` that is the
        official agent's failure text (``"Edit Error: ..."``) is a failed output, in
        ``index.failed`` with that text as the reason (scored ``missing``, not read as a path);
        for a repeated id the last record wins; the output is ``k = 0``. A line that is not a
        JSON object (a cut-off last line) and a ``response`` that is not text fail their own
        sample (status ``error``, the file and line named; a line whose id cannot be read is in
        ``index.problems``); the other records are indexed. A relative
        ``output_image`` is looked up next to the JSONL file, in its parent folder, in the
        dataset folder, then in the working folder;
        a path that exists nowhere is indexed as it is, so scoring reports the missing file.
        Records and files whose id is not a sample go to ``unknown``. When a PNG and a JSONL
        record give the same id and k, the JSONL record wins.
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"predictions folder {folder} does not exist")
        sources = self._model_sources(folder, models, model)
        index = PredictionIndex()
        for name, (png_folder, jsonl_files) in sources.items():
            index.files.setdefault(name, {})
            if png_folder is not None:
                found = index_predictions(
                    {name: png_folder},
                    self.prediction_pattern,
                    self.sample_ids(),
                    id_of=self._id_of,
                )
                index.files[name].update(found.files.get(name, {}))
                index.unknown.extend(found.unknown)
            for jsonl in jsonl_files:
                self._index_jsonl(index, name, jsonl)
        return index

    def _model_sources(
        self, folder: Path, models: Sequence[str] | None, model: str | None
    ) -> dict[str, tuple[Path | None, list[Path]]]:
        top_jsonl = sorted(p for p in folder.glob("*.jsonl") if p.is_file())
        has_png = any(p.suffix.lower() in (".png", ".txt") for p in folder.iterdir() if p.is_file())
        sources: dict[str, tuple[Path | None, list[Path]]] = {}
        official = any(model_of(p) != p.stem for p in top_jsonl)  # <model>_<mission>.jsonl
        if has_png and not official:
            sources[model or folder.name] = (folder, top_jsonl)
        elif top_jsonl:
            names = {model_of(path) for path in top_jsonl}
            if model in names:  # ``model`` picks one of the folder's models
                names, top_jsonl = {model}, [p for p in top_jsonl if model_of(p) == model]
            for path in top_jsonl:
                name = model if model and len(names) == 1 else model_of(path)
                sources.setdefault(name, (None, []))[1].append(path)
        else:
            for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
                if not sub.name.startswith("."):
                    sources[sub.name] = (sub, sorted(p for p in sub.glob("*.jsonl") if p.is_file()))
        return select_models(sources, models, f"no outputs for model(s) {{}} in {folder}")

    def _index_jsonl(self, index: PredictionIndex, name: str, jsonl: Path) -> None:
        for number, record, raw, problem in answer_lines(jsonl):
            answer_id = self._id_of.get(raw, raw if raw in self else None) if raw else None
            if record is None:  # a line that cannot be read fails its own sample, if named
                if answer_id is None:
                    index.problems.append(f"{problem}; no sample could be named, none failed")
                else:
                    index_answer_error(index, name, answer_id, jsonl, problem)
                continue
            if answer_id is not None and self.get(answer_id).metadata.get("format") in (
                "VQA",
                "MultimodalGeneration",
            ):  # a text answer (medgen/predictions.py)
                wrong = bad_response(record, jsonl, number)
                if wrong and not record.get("error"):
                    index_answer_error(index, name, answer_id, jsonl, wrong)
                    continue
                find = lambda ref: _output_path(ref, jsonl, self.root)  # noqa: E731
                index_answer_record(index, name, answer_id, record, jsonl, find)
                continue
            ref = record.get("output_image")
            if record.get("error") or not isinstance(ref, str) or not ref.strip():
                continue
            raw = str(record.get("sample_id") or "")
            sid = self._id_of.get(raw, raw)
            if _EDIT_ERROR.match(ref):
                if sid in self:
                    index.add_failed(name, sid, 0, f"the model's edit failed: {ref.strip()}")
                continue
            path = _output_path(ref, jsonl, self.root)
            if sid not in self:
                index.unknown.append((name, path))
                continue
            index.add(name, sid, 0, path)
            index.failed.get(name, {}).get(sid, {}).pop(0, None)


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
    from medibench.benchmarks.medgen.formats import read_formats, select_formats

    root, picked = select_formats(Path(path))
    if formats is not None or picked is not None:
        if not root.is_dir():
            raise DatasetError(f"MedGEN-Bench folder {root} does not exist or is not a folder")
        return read_formats(root, formats or picked or (), name)
    if not root.is_dir():
        raise DatasetError(f"MedGEN-Bench folder {root} does not exist or is not a folder")
    if not (root / EDIT_FILE).is_file():
        from medibench.benchmarks.medgen.parquet import read_release, release_root

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
    from medibench.benchmarks.medgen.parquet import release_root

    return (Path(root) / EDIT_FILE).is_file() or release_root(Path(root).absolute()) is not None


# --- helpers ---------------------------------------------------------------------------------


def _to_sample(record: dict, where: str, root: Path, problems: list[str]) -> Sample | None:
    raw_id = record.get("sample_id")
    who = f"{where} (sample '{raw_id}')" if raw_id else where
    category = record.get("category")
    if category is not None and str(category).replace(" ", "").lower() not in _EDIT_CATEGORIES:
        problems.append(f"{who}: category {category!r} is not ImageEdit; skipped")
        return None
    missing = [f for f in ("sample_id", "instruction") if not _text(record.get(f))]
    task = normalize_task(record.get("paper_task"), record.get("sub-category"))
    if not task:
        missing.append("paper_task")
    inputs = _images(record, "input_image", "input_images")
    targets = _images(record, "ground_truth_image", "ground_truth_images")
    if not inputs:
        missing.append("input_image")
    if not targets:
        missing.append("ground_truth_image")
    if missing:
        problems.append(f"{who}: missing or empty field(s) {', '.join(missing)}; skipped")
        return None
    if not is_editing_task(task):
        problems.append(f"{who}: task '{task}' is not an image-editing task; skipped")
        return None
    paths = _resolve_fields(
        root, {"input_image": inputs, "ground_truth_image": targets}, who, problems
    )
    if paths is None:
        return None
    metadata: dict[str, Any] = {
        "medgen_sample_id": str(raw_id),
        "format": "ImageEditing",
        "paper_task": record.get("paper_task"),
        "subtask": record.get("paper_subtask") or "",
    }
    perspective = PERSPECTIVES.get(task)
    if perspective is None:
        perspective = Perspective.modification
        metadata["unknown_task"] = True
        problems.append(
            f"{who}: unknown task '{task}' (known: {', '.join(PERSPECTIVES)}); kept as a "
            "modification sample"
        )
    for key in ("answer", "choice", "paper_format", "sub-category", "control"):
        if record.get(key) not in (None, "", []):
            metadata[key] = record[key]
    if len(paths["input_image"]) > 1:
        metadata["extra_input_images"] = paths["input_image"][1:]
    if len(paths["ground_truth_image"]) > 1:
        metadata["extra_ground_truth_images"] = paths["ground_truth_image"][1:]
    return Sample(
        sample_id=_UNSAFE.sub("-", str(raw_id)).strip(".") or "-",
        benchmark="medgen",
        input=paths["input_image"][0],
        instruction=str(record["instruction"]).strip(),
        target=paths["ground_truth_image"][0],
        task=task,
        modality=_text(record.get("modality")),
        perspective=perspective,
        description=_answer_text(record.get("answer")),
        source={"benchmark": "MedGEN-Bench", "record": where, "id": str(raw_id)},
        metadata=metadata,
    )


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _images(record: dict, singular: str, plural: str) -> list[str]:
    """The image paths of a record: the singular field first (string or list), else the plural."""
    for field in (singular, plural):
        value = record.get(field)
        if isinstance(value, str) and value.strip():
            return [value.strip()]
        if isinstance(value, list) and value:
            return [str(v) for v in value]
    return []


def _resolve_fields(
    root: Path, refs: dict[str, list[str]], who: str, problems: list[str]
) -> dict[str, list[str]] | None:
    """Each field's image references as absolute paths (:func:`_resolve`), or ``None`` with the
    problem of the first one that does not resolve appended to ``problems`` (the record is
    skipped)."""
    paths: dict[str, list[str]] = {}
    for field, field_refs in refs.items():
        paths[field] = []
        for ref in field_refs:
            path, problem = _resolve(root, ref)
            if problem:
                problems.append(f"{who}: {field} '{ref}' {problem}; skipped")
                return None
            paths[field].append(path)
    return paths


def _resolve(root: Path, ref: str) -> tuple[str, str | None]:
    """The absolute path of ``ref`` inside ``root``, or a problem. Symbolic links are followed:
    the official preparation links ``source/`` to the raw dataset outside the folder."""
    if not ref.strip():
        return "", "is empty"
    if Path(ref).is_absolute():  # the record's own statement, read as the code reads it
        path = Path(os.path.normpath(ref))
        return (str(path), None) if path.is_file() else ("", "does not exist")
    if ref.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", ref):
        return "", "is absolute on another system (image paths are relative to the folder)"
    lexical = Path(os.path.normpath(root / ref))
    if lexical != root and root not in lexical.parents:
        return "", f"leaves the dataset folder {root} (via '..')"
    if not lexical.is_file():
        return "", "does not exist"
    return str(lexical), None


def _answer_text(answer: object) -> str | None:
    if isinstance(answer, str):
        return answer.strip() or None
    if isinstance(answer, dict) and answer:
        return "\n".join(f"{key}: {value}" for key, value in answer.items())
    return None


def _output_path(ref: str, jsonl: Path, root: Path) -> Path:
    path = Path(ref)
    if path.is_absolute():
        return path
    candidates = [jsonl.parent / path, jsonl.parent.parent / path, root / path, Path.cwd() / path]
    return next((c.absolute() for c in candidates if c.is_file()), candidates[0].absolute())
