"""The MedGEN-Bench dataset: its samples, and where a model's outputs for them are (the
layouts are in :mod:`medibench.benchmarks.medgen.dataset`; the official answer files in
:mod:`.inference_files`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medibench.benchmarks.medgen._formats import format_samples
from medibench.benchmarks.medgen.inference_files import (
    SAMPLE_FORMATS,
    answer_lines,
    bad_response,
    file_formats,
    model_of,
    widen_for,
)
from medibench.benchmarks.medgen.predictions import index_answer_error, index_answer_record
from medibench.datasets._dataset import (
    Dataset,
    PredictionIndex,
    index_predictions,
    select_models,
)

__all__ = ["MedGenDataset"]

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

    @classmethod
    def from_formats(
        cls, root: Path, formats: Sequence[str], name: str = "medgen"
    ) -> MedGenDataset:
        """The samples of ``formats`` (keys of :data:`.formats.FORMATS`, or ``"all"``) from the
        prepared folder or Parquet release at ``root`` (:func:`.formats.read_formats`)."""
        base, samples, problems, formats = format_samples(root, formats)
        return cls(name, base, samples, problems=problems, formats=formats, formats_chosen=True)

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
        ``index.problems``); the other records are indexed. A relative ``output_image`` is
        looked up where ``eval.py``'s ``resolve_image_path`` looks, in its order (the working
        folder, then the dataset folder), then where the official code does not look (next to
        the JSONL file, then in its parent folder) (:func:`output_path`); a path that exists
        nowhere is indexed as it would be in the dataset folder, so scoring reports the
        missing file. A model whose outputs are all in official answer files is scored on the
        samples of their formats only (``index.scope``), as ``eval.py`` scores one file at a
        time.
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
            files_only = True
            if png_folder is not None:
                found = index_predictions(
                    {name: png_folder},
                    self.prediction_pattern,
                    self.sample_ids(),
                    id_of=self._id_of,
                )
                index.files[name].update(found.files.get(name, {}))
                index.unknown.extend(found.unknown)
                files_only = not found.files.get(name)
            for jsonl in jsonl_files:
                self._index_jsonl(index, name, jsonl)
            if files_only and jsonl_files and all(model_of(p) != p.stem for p in jsonl_files):
                index.scope[name] = self._samples_of(jsonl_files)
        return index

    def _samples_of(self, jsonl_files: Sequence[Path]) -> frozenset[str]:
        """The samples of the formats official answer files hold: the ones ``eval.py``
        scores the model on (:mod:`.inference_files`)."""
        kinds = {SAMPLE_FORMATS[f] for path in jsonl_files for f in file_formats(path)}
        return frozenset(s.sample_id for s in self if s.metadata.get("format") in kinds)

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
                find = lambda ref: output_path(ref, jsonl, self.root)  # noqa: E731
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
            path = output_path(ref, jsonl, self.root)
            if sid not in self:
                index.unknown.append((name, path))
                continue
            index.add(name, sid, 0, path)
            index.failed.get(name, {}).get(sid, {}).pop(0, None)


def output_path(ref: str, jsonl: Path, root: Path) -> Path:
    """Where a relative ``output_image`` reference of ``jsonl`` is read from: the first of the
    working folder and the dataset folder ``root`` (``eval.py``'s ``resolve_image_path``, in
    its order) that holds it, else the first of the JSONL's folder and its parent; a path that
    exists nowhere is the dataset folder's (the one the official code would fail to open).
    An absolute reference is itself."""
    path = Path(ref)
    if path.is_absolute():
        return path
    candidates = [Path.cwd() / path, root / path, jsonl.parent / path, jsonl.parent.parent / path]
    return next((c.absolute() for c in candidates if c.is_file()), candidates[1].absolute())
