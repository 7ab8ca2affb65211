"""The dataset object every adapter returns, and where model outputs are found.

A :class:`Dataset` holds :class:`~medibench.samples.Sample` records with absolute paths, the
problems met while reading the layout (samples skipped or incomplete: reported, never fatal), the
protocols that score it by default, and how its published model outputs are laid out on disk
(:meth:`Dataset.find_predictions`).
"""

from __future__ import annotations

import copy
import difflib
import os
import pickle
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, overload

from medibench.samples import Sample

T = TypeVar("T")

__all__ = ["Dataset", "ModelOutputs", "PredictionIndex", "index_predictions"]


class ModelOutputs(MutableMapping[str, dict[int, Path]]):
    """One model's output files, ``{sample_id: {k: path}}``, kept as one string per sample: the
    file names (relative to ``folder`` where they lie in it) after their ``k``. Each sample's
    ``{k: path}`` is made when looked up, so an index of 100,000 outputs holds 100,000 short
    strings, not 100,000 ``Path`` objects and dicts."""

    def __init__(self, folder: Path | None = None) -> None:
        self._base = f"{folder}{os.sep}" if folder is not None else ""
        self._names: dict[str, str] = {}

    def __getitem__(self, sample_id: str) -> dict[int, Path]:
        parts = self._names[sample_id].split("\0") if self._names[sample_id] else []
        return {int(k): self._path(name) for k, name in zip(parts[::2], parts[1::2], strict=True)}

    def __setitem__(self, sample_id: str, outputs: Mapping[int, Path]) -> None:
        self._names[sample_id] = "\0".join(f"{k}\0{self._name(p)}" for k, p in outputs.items())

    def __delitem__(self, sample_id: str) -> None:
        del self._names[sample_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"ModelOutputs({dict(self.items())!r})"

    def _name(self, path: Path) -> str:
        text = str(path)
        return text[len(self._base) :] if self._base and text.startswith(self._base) else text

    def _path(self, name: str) -> Path:
        return Path(name if os.path.isabs(name) or not self._base else self._base + name)


@dataclass
class PredictionIndex:
    """Prediction files found in a folder, by model, sample id and k.

    Attributes:
        files: ``{model: {sample_id: {k: path}}}`` (a model's outputs: a dict, or a
            :class:`ModelOutputs` where the index is large).
        unknown: ``(model, path)`` of files whose sample id is not in the benchmark (reported and
            ignored).
        failed: ``{model: {sample_id: {k: reason}}}``: outputs the layout records as failed
            rather than absent (MedGEN's ``"Edit Error: ..."``); scored as ``missing`` with the
            reason, never read as a file.
        problems: what the layout could not read and could not pin on a sample (a cut-off line
            without a legible id), one line each, naming the file and line.
        scope: ``{model: sample ids}`` for a model the layout scores on some samples only
            (MedGEN's official answer files: the samples of their missions); a model not in it
            is scored on every sample.
    """

    files: dict[str, MutableMapping[str, dict[int, Path]]] = field(default_factory=dict)
    unknown: list[tuple[str, Path]] = field(default_factory=list)
    failed: dict[str, dict[str, dict[int, str]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    scope: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def models(self) -> list[str]:
        return sorted(self.files)

    def add(self, model: str, sample_id: str, k: int, path: Path) -> None:
        outputs = self.files.setdefault(model, {})
        outputs[sample_id] = {**outputs.get(sample_id, {}), k: path}

    def add_failed(self, model: str, sample_id: str, k: int, reason: str) -> None:
        """Record that output ``k`` of ``sample_id`` failed, and why (no file to read)."""
        outputs = self.files.setdefault(model, {})
        if sample_id in outputs:
            kept = {j: path for j, path in outputs[sample_id].items() if j != k}
            if kept:
                outputs[sample_id] = kept
            else:
                del outputs[sample_id]
        self.failed.setdefault(model, {}).setdefault(sample_id, {})[k] = reason

    def scores(self, model: str, sample_id: str) -> bool:
        """Whether ``model`` is scored on ``sample_id`` (:attr:`scope`)."""
        return model not in self.scope or sample_id in self.scope[model]

    def reason(self, model: str, sample_id: str, k: int) -> str | None:
        """Why output ``k`` of ``sample_id`` is missing, when the layout says; else ``None``."""
        return self.failed.get(model, {}).get(sample_id, {}).get(k)


class Dataset(Sequence[Sample]):
    """Samples of one benchmark, in layout order, with absolute image paths.

    The samples are kept pickled and compressed, one ``bytes`` each (about 400 bytes, against
    a few kilobytes for a live record), and rebuilt when iterated or got (about 10 us): a
    dataset of 100,000 samples takes tens of megabytes, and a stage that walks it holds one
    sample at a time.

    Attributes:
        name: the dataset's name.
        root: the folder it was read from.
        problems: human-readable reports of what could not be read (a sample without its mask,
            a missing file, a truncated field); the samples concerned are skipped or kept as the
            adapter documents.
        notes: what a reader of its results should know about where it came from (an
            archive extracted, an unpinned Hub revision, a download), one line each.
        default_protocols: protocol specs (``name@version``) that score it when none is given.
        expected_k: outputs per sample the official protocol expects (``None``: what is there).
    """

    default_protocols: tuple[str, ...] = ("native@1",)
    expected_k: int | None = None
    #: file name pattern of one output in a model's folder; ``sid`` and ``k`` groups.
    prediction_pattern: re.Pattern[str] = re.compile(r"^(?P<sid>.+)_(?P<k>\d+)\.png$")

    def __init__(
        self,
        name: str,
        root: Path,
        samples: Iterable[Sample],
        *,
        problems: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.root = root
        self._set_samples(samples)
        self.problems = list(problems)
        self.notes: list[str] = []

    def _set_samples(self, samples: Iterable[Sample]) -> None:
        packed = [(s.sample_id, _pack(s)) for s in samples]
        self._packed = tuple(p for _, p in packed)
        self._by_id = {sid: i for i, (sid, _) in enumerate(packed)}

    def __len__(self) -> int:
        return len(self._packed)

    def __iter__(self) -> Iterator[Sample]:
        return (_unpack(p) for p in self._packed)

    @overload
    def __getitem__(self, index: int) -> Sample: ...
    @overload
    def __getitem__(self, index: slice) -> Dataset: ...
    def __getitem__(self, index: int | slice) -> Sample | Dataset:
        """The sample at position ``index``, or a slice of the dataset as :meth:`subset`
        makes it (``ds[:n]``, a shard's ``ds[i::n]``) without rebuilding a sample."""
        if isinstance(index, slice):
            return self._copy(index)
        return _unpack(self._packed[index])

    def by_id(self) -> Mapping[str, Sample]:
        """The samples by id, each rebuilt when looked up (what :meth:`get` gives)."""
        return _SamplesById(self)

    def __contains__(self, sample_id: object) -> bool:
        return sample_id in self._by_id

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, root={str(self.root)!r}, "
            f"samples={len(self)})"
        )

    def get(self, sample_id: str) -> Sample:
        """The sample with this id; ``KeyError`` naming close ids when there is none."""
        try:
            return _unpack(self._packed[self._by_id[sample_id]])
        except KeyError:
            close = difflib.get_close_matches(sample_id, self._by_id, n=3, cutoff=0.6)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise KeyError(f"dataset '{self.name}' has no sample '{sample_id}'.{hint}") from None

    def subset(self, samples: Iterable[Sample]) -> Dataset:
        """A copy of this dataset (same kind, root, notes, problems and prediction layout)
        holding ``samples`` only, in the order given."""
        out = copy.copy(self)
        out._set_samples(samples)
        out.problems, out.notes = list(self.problems), list(self.notes)
        return out

    def _copy(self, part: slice) -> Dataset:
        out = copy.copy(self)
        out._packed = self._packed[part]
        out._by_id = {sid: i for i, sid in enumerate(list(self._by_id)[part])}
        out.problems, out.notes = list(self.problems), list(self.notes)
        return out

    def sample_ids(self) -> list[str]:
        """All sample ids, in layout order."""
        return list(self._by_id)

    def find_predictions(
        self, folder: str | Path, *, models: Sequence[str] | None = None, model: str | None = None
    ) -> PredictionIndex:
        """Index the outputs in ``folder``: one sub-folder per model, files
        ``<sample_id>_<k>.png`` (medibench's own layout). A folder that holds the PNG files
        directly is one model, named ``model`` (default: the folder's name).

        Adapters whose official layout differs override this.
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"predictions folder {folder} does not exist")
        if any(p.suffix.lower() == ".png" for p in folder.iterdir() if p.is_file()):
            return index_predictions(
                {model or folder.name: folder}, self.prediction_pattern, self._by_id
            )
        return index_predictions(
            _model_folders(folder, models), self.prediction_pattern, self._by_id
        )


def _pack(sample: Sample) -> bytes:
    # zlib at level 1: a sample's three image paths share most of their text.
    return zlib.compress(pickle.dumps(sample, protocol=5), 1)


def _unpack(packed: bytes) -> Sample:
    sample: Sample = pickle.loads(zlib.decompress(packed))
    return sample


class _SamplesById(Mapping[str, Sample]):
    def __init__(self, dataset: Dataset) -> None:
        self._dataset = dataset

    def __getitem__(self, sample_id: str) -> Sample:
        ds = self._dataset
        return _unpack(ds._packed[ds._by_id[sample_id]])

    def __contains__(self, sample_id: object) -> bool:
        return sample_id in self._dataset._by_id

    def __iter__(self) -> Iterator[str]:
        return iter(self._dataset._by_id)

    def __len__(self) -> int:
        return len(self._dataset)


def index_predictions(
    model_folders: dict[str, Path],
    pattern: re.Pattern[str],
    known: Iterable[str],
    *,
    id_of: dict[str, str] | None = None,
) -> PredictionIndex:
    """Index each model folder's files matching ``pattern`` (groups ``sid`` and ``k``).

    ``id_of`` maps the ``sid`` group to a sample id when the layout names files by something
    else (MieDB names outputs after the target file). Files with ids not in ``known`` go to
    ``unknown``.
    """
    known = set(known)
    index = PredictionIndex()
    for model, folder in model_folders.items():
        index.files.setdefault(model, ModelOutputs(folder))
        for name in sorted(os.listdir(folder)):  # names, not a Path each, until one matches
            m = pattern.match(name)
            path = folder / name
            if not m or not path.is_file():
                continue
            sid = m["sid"] if id_of is None else id_of.get(m["sid"], m["sid"])
            if sid not in known:
                index.unknown.append((model, path))
                continue
            index.add(model, sid, int(m["k"]), path)
    return index


def _model_folders(folder: Path, models: Sequence[str] | None) -> dict[str, Path]:
    found = {
        p.name: p for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith(".")
    }
    return select_models(found, models, f"no folder for model(s) {{}} in {folder}")


def select_models(found: dict[str, T], models: Sequence[str] | None, missing: str) -> dict[str, T]:
    """The entries of ``found`` (model -> its outputs) for ``models`` (all when ``None``), in
    that order; ``FileNotFoundError`` with ``missing`` (``{}`` = the absent names) and what was
    found, when a named model has none."""
    if models is None:
        return found
    absent = [m for m in models if m not in found]
    if absent:
        raise FileNotFoundError(
            f"{missing.format(', '.join(absent))}; found: {', '.join(found) or '(none)'}"
        )
    return {m: found[m] for m in models}
