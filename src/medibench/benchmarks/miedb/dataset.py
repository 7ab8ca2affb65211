"""MieDB-100k benchmark split (docs/protocols.md): ``dataBenchmark/metadata.json`` and its images.

Layout (code Raiiyf/MieDB-100k, data HF ``Laiyf/MieDB-100k``)::

    dataBenchmark/
      metadata.json      a JSON list of {idx, category, input_image, output_image, prompt, note}
      ...                images; paths in metadata.json are relative to dataBenchmark/

The path may be that folder, the folder above it, the download itself (``dataBenchmark_00.tar``,
extracted once into ``dataBenchmark_00.tar.medibench/`` beside it, see
:func:`medibench.sources.resolve_source`), or a folder holding only that download.

How a record becomes a :class:`~medibench.samples.Sample`:

* ``perspective`` from ``category`` (Perception | Modification | Transformation, compared
  case-insensitively as the official DICE and PSNR/SSIM scripts do). An unknown category is
  reported in :attr:`~medibench.datasets.Dataset.problems` and the record skipped.
* ``sample_id`` = ``str(idx)``. When ``idx`` is missing, not an integer or string, not usable as
  a file name, or already used by an earlier record, the id is the output file name without
  ``.png`` (the name the official scripts key predictions by); the fallback is reported. A
  record for which both are taken is skipped (reported).
* ``instruction`` = ``prompt``; ``task`` = ``note`` (for example ``"Multiclasses"``) or ``""``;
  the layout carries no region or modality, so those stay empty. ``metadata`` keeps ``idx``,
  the raw ``category``, ``note``, the folder of the input image and the output file's stem.
* Perception: ``overlay_color`` is the colour suffix of the target file (``*_red.png``,
  ``*_green.png``, ``*_blue.png``, case-insensitive as the official code upper-cases it). When
  ``note == "Multiclasses"`` (exact match, as in the official code) the label is the union over
  all three colours, whatever the file name says: the official ``extract_alpha_multi_color``
  sums the masks of red, green and blue. A single-class perception target without a colour
  suffix is reported and skipped (the official code would fail on it).
* ``mask`` is ``None``: the benchmark ships no label files. The protocols reconstruct the label
  from the target overlay (``overlay_to_mask(target, input, colours)``), as the official code
  does.
* A record whose input or target file does not exist is reported and skipped. A path that is
  absolute or leaves ``dataBenchmark/`` raises :class:`DatasetError` (it is never read).

Model outputs, official naming: ``<eval folder>/<model>/<stem(output_image)>_<k>.png``, k = 0..2
(the inference scripts name every output after the *target* file). See
:meth:`MieDBDataset.find_predictions`.

Example:
    >>> ds = read_miedb("/data/MieDB-100k")                        # doctest: +SKIP
    >>> ds.get("0").perspective, ds.get("0").overlay_color         # doctest: +SKIP
    (<Perspective.perception: 'perception'>, ('red',))
    >>> index = ds.find_predictions("/data/MieDB-100k")  # inference/eval_results # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

from medibench.datasets._base import DatasetError, require_samples, resolve_inside
from medibench.datasets._dataset import Dataset, PredictionIndex, _model_folders, index_predictions
from medibench.samples import Perspective, RecordError, Sample
from medibench.sources import is_archive, resolve_source

__all__ = ["MieDBDataset", "read_miedb", "detect", "BENCHMARK_FOLDER", "METADATA", "MULTICLASS"]

#: The benchmark folder inside a MieDB-100k checkout, and its manifest.
BENCHMARK_FOLDER = "dataBenchmark"
METADATA = "metadata.json"
#: Where the official inference scripts write model outputs, from the repository root.
EVAL_FOLDER = Path("inference") / "eval_results"
#: The ``note`` value that marks a multi-class perception sample (all three overlay colours).
MULTICLASS = "Multiclasses"

Colour = Literal["red", "green", "blue"]
_ALL_COLOURS: tuple[Colour, ...] = ("red", "green", "blue")
_REQUIRED = ("category", "input_image", "output_image", "prompt")
_SOURCE = {
    "benchmark": "MieDB-100k",
    "paper": "arXiv 2602.09587",
    "code": "https://github.com/Raiiyf/MieDB-100k",
    "data": "https://huggingface.co/datasets/Laiyf/MieDB-100k",
}


class MieDBDataset(Dataset):
    """The MieDB-100k benchmark split, in ``metadata.json`` order, with absolute image paths.

    Attributes (besides :class:`Dataset`'s):
        output_stems: ``{stem of output_image: [sample ids]}``; the official scripts find a
            sample's outputs by this stem (several ids when two records share a file name).
    """

    default_protocols = ("miedb@paper", "miedb@1")
    expected_k = 3

    def __init__(
        self, *args: Any, output_stems: dict[str, list[str]] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        if output_stems is None:
            output_stems = {}
            for s in self:
                output_stems.setdefault(s.metadata.get("output_stem", s.sample_id), []).append(
                    s.sample_id
                )
        self.output_stems = output_stems

    def find_predictions(
        self, folder: str | os.PathLike, *, models: Sequence[str] | None = None, model=None
    ) -> PredictionIndex:
        """Index official outputs: ``folder/<model>/<stem(output_image)>_<k>.png``.

        ``folder`` is the evaluation folder holding one sub-folder per model (the official
        ``inference/eval_results/``), or a folder above it: the repository root (which has
        ``inference/eval_results/``) or ``inference/`` (which has ``eval_results/``). A folder
        that holds PNG files directly is one model, named ``model`` (default: the folder's
        name). Files named ``<sample_id>_<k>.png`` (medibench's own run
        layout) are accepted too when no output stem has that name.

        Reported in ``.unknown`` and ignored: files whose stem is no sample's, and outputs with
        ``k >= 3`` (the official scripts read k = 0, 1, 2 only). When two records share an
        output file name, the official scripts score the same file for both: so does the index.
        """
        folder = _eval_folder(Path(folder))
        if any(p.suffix.lower() == ".png" for p in folder.iterdir() if p.is_file()):
            model_folders = {model or folder.name: folder}
        else:
            model_folders = _model_folders(folder, models)
        id_of = {stem: ids[0] for stem, ids in self.output_stems.items()}
        found = index_predictions(
            model_folders, self.prediction_pattern, self.sample_ids(), id_of=id_of
        )
        index = PredictionIndex(unknown=list(found.unknown))
        shared = {ids[0]: ids[1:] for ids in self.output_stems.values() if len(ids) > 1}
        for name, by_id in found.files.items():
            index.files.setdefault(name, {})
            for sid, by_k in by_id.items():
                for k, path in by_k.items():
                    if k >= self.expected_k:
                        index.unknown.append((name, path))
                        continue
                    for target in (sid, *shared.get(sid, ())):
                        index.add(name, target, k, path)
        return index


def read_miedb(path: str | os.PathLike | None = None, *, name: str | None = None) -> MieDBDataset:
    """Read the MieDB-100k benchmark split at ``path``.

    ``path`` is the folder that holds ``dataBenchmark/`` or ``dataBenchmark/`` itself (any folder
    with ``metadata.json``), an archive of either (``dataBenchmark_00.tar``, extracted once next
    to it), or a folder whose only MieDB content is such an archive.

    Raises:
        DatasetError: no such folder, a truncated or unsafe archive (a
            :class:`~medibench.sources.SourceError`), no ``metadata.json``, a file that is not
            JSON or not a list of objects (naming the file and the first offending entry), an
            image path that is absolute or leaves the benchmark folder, no sample left (an
            empty list, or every record skipped: the first problems are named).

    Records that cannot become samples (unknown category, missing field or file, perception
    target without a colour) are reported in ``problems`` and skipped.
    """
    if path is None or str(path) == "":
        raise DatasetError("the MieDB-100k dataset needs a folder: use 'miedb:/path/to/MieDB-100k'")
    bench = _benchmark_folder(resolve_source(path, what="MieDB-100k dataset"), given=Path(path))
    manifest = bench / METADATA
    records = _load_metadata(manifest)
    bench = bench.resolve()
    samples: list[Sample] = []
    problems: list[str] = []
    stems: dict[str, list[str]] = {}
    used: set[str] = set()
    for position, record in enumerate(records):
        where = f"{manifest} entry {position}"
        sample = _sample(bench, record, where, used, problems)
        if sample is None:
            continue
        used.add(sample.sample_id)
        stems.setdefault(sample.metadata["output_stem"], []).append(sample.sample_id)
        samples.append(sample)
    require_samples(samples, manifest, problems)
    for stem, ids in stems.items():
        if len(ids) > 1:
            problems.append(
                f"{manifest}: samples {', '.join(repr(i) for i in ids)} share the output file "
                f"name '{stem}.png': the official scripts score the same prediction for all of them"
            )
    return MieDBDataset(name or "miedb", bench, samples, problems=problems, output_stems=stems)


def detect(root: Path) -> bool:
    """Whether ``root`` (or its ``dataBenchmark/``) looks like a MieDB-100k benchmark folder.

    True when ``metadata.json`` there is a non-empty JSON list whose first entry is an object
    with ``category``, ``input_image`` and ``output_image``. Never raises.
    """
    try:
        root = Path(root)
        for bench in (root / BENCHMARK_FOLDER, root):
            manifest = bench / METADATA
            if manifest.is_file():
                with open(manifest, encoding="utf-8") as fh:
                    data = json.load(fh)
                first = data[0] if isinstance(data, list) and data else None
                return isinstance(first, dict) and {
                    "category",
                    "input_image",
                    "output_image",
                } <= set(first)
    except (OSError, ValueError):
        return False
    return False


# --- helpers ---------------------------------------------------------------------------------


def _benchmark_folder(root: Path, *, given: Path) -> Path:
    """The folder with ``metadata.json`` under ``root`` (``given`` resolved by the source layer).

    Looked for at ``root``, ``root/dataBenchmark``, and, in an extracted archive, one level down
    (an archive of the folder above ``dataBenchmark/``). A folder with none but a
    ``dataBenchmark*.tar`` download in it is read through that archive.
    """
    if not root.is_dir():
        raise DatasetError(f"MieDB-100k folder {root} does not exist or is not a folder")
    candidates = [root / BENCHMARK_FOLDER, root]
    if root != given:  # an extracted archive: its single top folder too
        tops = [p for p in root.iterdir() if p.is_dir()]
        if len(tops) == 1:
            candidates += [tops[0] / BENCHMARK_FOLDER, tops[0]]
    for bench in candidates:
        if (bench / METADATA).is_file():
            return bench
    if root == given:
        downloads = sorted(
            p for p in root.glob(f"{BENCHMARK_FOLDER}*") if p.is_file() and is_archive(p)
        )
        if len(downloads) == 1:
            return _benchmark_folder(resolve_source(downloads[0]), given=downloads[0])
    where = f"{given} (extracted to {root})" if root != given else str(root)
    raise DatasetError(
        f"{where} is not a MieDB-100k folder: neither {BENCHMARK_FOLDER}/{METADATA} nor "
        f"{METADATA} exists in it"
    )


def _eval_folder(folder: Path) -> Path:
    """The folder of model sub-folders that ``folder`` (repository root, ``inference/`` or
    ``eval_results/`` itself) stands for."""
    if not folder.is_dir():
        raise FileNotFoundError(f"predictions folder {folder} does not exist")
    for below in (EVAL_FOLDER, Path(EVAL_FOLDER.name)):
        if (folder / below).is_dir():
            return folder / below
    return folder


def _load_metadata(manifest: Path) -> list[dict[str, Any]]:
    try:
        with open(manifest, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{manifest}: not valid JSON ({exc})") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{manifest}: not UTF-8 text ({exc})") from None
    if not isinstance(data, list):
        raise DatasetError(
            f"{manifest}: expected a JSON list of sample objects, got a JSON {_json_kind(data)}"
        )
    for position, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise DatasetError(
                f"{manifest}: expected a JSON list of sample objects, but entry {position} is a "
                f"JSON {_json_kind(entry)}"
            )
    return data


def _sample(
    bench: Path, record: dict[str, Any], where: str, used: set[str], problems: list[str]
) -> Sample | None:
    """One record as a Sample, or None after reporting why it is skipped."""
    missing = [f for f in _REQUIRED if not isinstance(record.get(f), str) or not record[f]]
    if missing:
        problems.append(
            f"{where}: skipped, field(s) {', '.join(missing)} missing or not a non-empty string"
        )
        return None
    where = f"{where} (idx {record.get('idx')!r})"
    category = record["category"]
    try:
        perspective = Perspective(category.strip().lower())
    except ValueError:
        problems.append(
            f"{where}: skipped, unknown category {category!r} (expected Perception, "
            "Modification or Transformation)"
        )
        return None
    paths = {}
    for field in ("input_image", "output_image"):
        resolved = resolve_inside(bench, record[field], what=f"{where}, field '{field}'")
        if not resolved.is_file():
            problems.append(f"{where}: skipped, {field} '{record[field]}' does not exist")
            return None
        paths[field] = resolved
    output_name = record["output_image"].replace("\\", "/").rsplit("/", 1)[-1]
    stem = output_name[: -len(".png")] if output_name.endswith(".png") else Path(output_name).stem
    note = record.get("note")
    note = note if isinstance(note, str) else ""
    colours: tuple[Colour, ...] = ()
    if perspective is Perspective.perception:
        if note == MULTICLASS:
            colours = _ALL_COLOURS
        else:
            suffix = stem.rsplit("_", 1)[-1].lower() if "_" in stem else ""
            if suffix not in _ALL_COLOURS:
                problems.append(
                    f"{where}: skipped, perception target '{record['output_image']}' has no "
                    "colour suffix (_red.png, _green.png or _blue.png) and the note is not "
                    f"'{MULTICLASS}': its overlay colour is unknown"
                )
                return None
            colours = (cast(Colour, suffix),)
    sid = _sample_id(record.get("idx"), stem, used, where, problems)
    if sid is None:
        return None
    try:
        return Sample(
            sample_id=sid,
            benchmark="miedb",
            input=str(paths["input_image"]),
            target=str(paths["output_image"]),
            instruction=record["prompt"],
            perspective=perspective,
            task=note,
            overlay_color=colours,
            source=dict(_SOURCE),
            metadata={
                "idx": record.get("idx"),
                "category": category,
                "note": record.get("note"),
                "input_folder": str(Path(record["input_image"]).parent.as_posix()),
                "output_stem": stem,
            },
        )
    except RecordError as exc:  # an output name with characters a sample id cannot hold
        problems.append(f"{where}: skipped, {exc}")
        return None


def _sample_id(
    idx: object, stem: str, used: set[str], where: str, problems: list[str]
) -> str | None:
    candidate = None
    if isinstance(idx, (int, str)) and not isinstance(idx, bool):
        candidate = str(idx)
        if not candidate or set(candidate) & set('/\\:*?"<>|\n\t') or candidate in {".", ".."}:
            why = f"idx {idx!r} is not usable as a file name"
            candidate = None
        elif candidate in used:
            why = f"idx {idx!r} is already used by an earlier entry"
            candidate = None
    else:
        why = "no idx" if idx is None else f"idx {idx!r} is not an integer or string"
    if candidate is not None:
        return candidate
    if stem in used or not stem:
        problems.append(f"{where}: skipped, {why} and the output name '{stem}' is taken too")
        return None
    problems.append(f"{where}: {why}; using the output file name '{stem}' as sample_id")
    return stem


def _json_kind(value: object) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean"}.get(
        type(value), "number" if isinstance(value, (int, float)) else "null"
    )
