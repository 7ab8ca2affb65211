"""Saved predictions: per-sample class probabilities (or logits), labels and group columns.

One record, :class:`Predictions`, whatever produced the numbers. Files:

* ``.npz``: arrays ``probs`` (N x C) or ``logits`` (N x C) or both, ``labels`` (N); any other
  1-D array of length N is a group column (dataset, domain, backbone, method, template, seed).
* ``.csv`` / ``.parquet``: one row per sample, columns ``prob_0 .. prob_{C-1}`` or
  ``logit_0 .. logit_{C-1}`` (or both), ``label``; every other column is a group column.

Probabilities must be finite, in [0, 1] and sum to 1 per row (within ``atol``); logits are
turned into probabilities by a softmax. Every problem is a ``ValueError`` naming the source, the
first bad row and what is wrong.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = [
    "Predictions",
    "as_predictions",
    "load_predictions",
    "save_predictions",
    "softmax",
]

Kind = Literal["auto", "probs", "logits"]
_COLUMN = re.compile(r"^(prob|logit)_(\d+)$")


@dataclass(frozen=True)
class Predictions:
    """Probabilities ``probs`` (N x C, float64, rows sum to 1), integer ``labels`` (N), the
    ``logits`` when they were given (N x C) and group columns (name -> length-N array)."""

    probs: np.ndarray
    labels: np.ndarray
    logits: np.ndarray | None = None
    groups: Mapping[str, np.ndarray] = field(default_factory=dict)
    source: str = "<arrays>"

    @property
    def n(self) -> int:
        return int(self.labels.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.probs.shape[1])

    def subset(self, mask: np.ndarray, *, source: str | None = None) -> Predictions:
        """The samples where ``mask`` is true (a boolean array or indices)."""
        return Predictions(
            probs=self.probs[mask],
            labels=self.labels[mask],
            logits=None if self.logits is None else self.logits[mask],
            groups={k: v[mask] for k, v in self.groups.items()},
            source=source or self.source,
        )

    def group_keys(self, by: list[str]) -> list[tuple[tuple[str, ...], np.ndarray]]:
        """``[(values, indices), ...]`` of the groups formed by the columns ``by``, sorted."""
        for col in by:
            if col not in self.groups:
                known = ", ".join(sorted(self.groups)) or "none"
                raise ValueError(f"{self.source}: no group column {col!r} (columns: {known})")
        keys = [tuple(str(self.groups[c][i]) for c in by) for i in range(self.n)]
        out: dict[tuple[str, ...], list[int]] = {}
        for i, key in enumerate(keys):
            out.setdefault(key, []).append(i)
        return [(k, np.asarray(out[k])) for k in sorted(out)]


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax, computed stably (the row maximum subtracted first)."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def as_predictions(
    labels: Any,
    *,
    probs: Any = None,
    logits: Any = None,
    groups: Mapping[str, Any] | None = None,
    source: str = "<arrays>",
    atol: float = 1e-4,
) -> Predictions:
    """Check arrays and make a :class:`Predictions`.

    Args:
        labels: N integer class indices in ``[0, C)``.
        probs: N x C probabilities (rows sum to 1 within ``atol``).
        logits: N x C logits (softmaxed into ``probs`` when ``probs`` is not given).
        groups: group columns, each of length N.
        source: the name used in error messages (a file path).
        atol: tolerance on the row sums of ``probs``.

    Raises:
        ValueError: no scores, a shape mismatch, one class only, a NaN or infinite value (naming
            the first bad row), probabilities outside [0, 1] or not summing to 1 (naming the
            first bad row), labels that are not integers or out of range.
    """
    if probs is None and logits is None:
        raise ValueError(f"{source}: neither probabilities nor logits were given")
    lab = _labels(labels, source)
    n = lab.shape[0]
    if n == 0:
        raise ValueError(f"{source}: no samples")
    lg = None if logits is None else _matrix(logits, "logits", n, source)
    if probs is not None:
        p = _matrix(probs, "probabilities", n, source)
        _check_probs(p, source, atol)
    else:
        assert lg is not None
        p = softmax(lg)
    if lg is not None and lg.shape != p.shape:
        raise ValueError(f"{source}: logits are {lg.shape} but probabilities are {p.shape}")
    bad = np.flatnonzero((lab < 0) | (lab >= p.shape[1]))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{source}: row {i}: label {int(lab[i])} is out of range for {p.shape[1]} classes "
            f"(labels must be in 0..{p.shape[1] - 1}; {bad.size} rows are out of range)"
        )
    cols: dict[str, np.ndarray] = {}
    for name, values in (groups or {}).items():
        arr = np.asarray(values)
        if arr.ndim != 1 or arr.shape[0] != n:
            raise ValueError(
                f"{source}: group column {name!r} has shape {arr.shape}, expected ({n},)"
            )
        cols[str(name)] = arr
    return Predictions(probs=p, labels=lab, logits=lg, groups=cols, source=source)


def load_predictions(path: str | Path, *, kind: Kind = "auto", atol: float = 1e-4) -> Predictions:
    """Read predictions from ``.npz``, ``.csv`` or ``.parquet`` (layouts in the module doc).

    ``kind="probs"`` or ``"logits"`` says which scores to use when a file has both (the default,
    ``"auto"``, keeps both: probabilities as given, logits for the calibrators); declaring
    ``"logits"`` for a file that has only probabilities is an error.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such predictions file")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        arrays = _read_npz(path)
    elif suffix == ".csv":
        arrays = _columns_to_arrays(_read_csv(path), path)
    elif suffix in (".parquet", ".pq"):
        arrays = _columns_to_arrays(_read_parquet(path), path)
    else:
        raise ValueError(f"{path}: unknown predictions format {suffix!r} (.npz, .csv, .parquet)")
    if "labels" not in arrays:
        raise ValueError(f"{path}: no labels (an npz array 'labels' or a column 'label')")
    probs, logits = arrays.pop("probs", None), arrays.pop("logits", None)
    if kind == "probs":
        if probs is None:
            raise ValueError(f"{path}: probabilities were declared but the file has only logits")
        logits = None
    elif kind == "logits":
        if logits is None:
            raise ValueError(f"{path}: logits were declared but the file has only probabilities")
        probs = None
    elif kind != "auto":
        raise ValueError(f"kind must be 'auto', 'probs' or 'logits', got {kind!r}")
    labels = arrays.pop("labels")
    return as_predictions(
        labels, probs=probs, logits=logits, groups=arrays, source=str(path), atol=atol
    )


def save_predictions(pred: Predictions, path: str | Path) -> Path:
    """Write ``pred`` as ``.npz``, ``.csv`` or ``.parquet`` (atomically), in the layout
    :func:`load_predictions` reads."""
    from medibench.io import atomic_write_bytes

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        buf = io.BytesIO()
        arrays: dict[str, np.ndarray] = {"probs": pred.probs, "labels": pred.labels}
        if pred.logits is not None:
            arrays["logits"] = pred.logits
        for name, values in pred.groups.items():
            if name in arrays:
                raise ValueError(f"{path}: group column {name!r} clashes with a score array")
            arrays[name] = values
        np.savez(buf, **arrays)  # type: ignore[arg-type]
        return atomic_write_bytes(path, buf.getvalue())
    columns = _to_columns(pred)
    if suffix == ".csv":
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(list(columns))
        writer.writerows(zip(*columns.values(), strict=True))
        return atomic_write_bytes(path, text.getvalue().encode("utf-8"))
    if suffix in (".parquet", ".pq"):
        pa, pq = _pyarrow()
        buf = io.BytesIO()
        pq.write_table(pa.table({k: list(v) for k, v in columns.items()}), buf)
        return atomic_write_bytes(path, buf.getvalue())
    raise ValueError(f"{path}: unknown predictions format {suffix!r} (use .npz, .csv, .parquet)")


# --- helpers ---------------------------------------------------------------------------------


def _labels(labels: Any, source: str) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{source}: labels must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "f":
        raise ValueError(f"{source}: labels must be integer class indices, got dtype {arr.dtype}")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{source}: row {i}: label {float(arr[i])!r} is not an integer class index"
        )
    return arr.astype(np.int64)


def _matrix(values: Any, what: str, n: int, source: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{source}: {what} must be N x C, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{source}: {arr.shape[0]} rows of {what} but {n} labels")
    if arr.shape[1] < 2:
        raise ValueError(
            f"{source}: {what} have {arr.shape[1]} column: calibration needs at least 2 classes"
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(
            f"{source}: row {i}, class {j}: {what} value {arr[i, j]} is not finite "
            f"({int(bad.any(axis=1).sum())} rows have NaN or infinite values)"
        )
    return arr


def _check_probs(p: np.ndarray, source: str, atol: float) -> None:
    out = (p < 0) | (p > 1)
    if out.any():
        i, j = (int(v) for v in np.argwhere(out)[0])
        raise ValueError(
            f"{source}: row {i}, class {j}: probability {p[i, j]} is outside [0, 1] "
            "(are these logits? declare them as logits)"
        )
    sums = p.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > atol)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{source}: row {i}: probabilities sum to {sums[i]:.6g}, not 1 (tolerance {atol}; "
            f"{bad.size} rows are off); if these are logits or scores, declare them as logits"
        )


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    if path.stat().st_size == 0:
        raise ValueError(f"{path}: empty file (0 bytes), not an .npz archive")
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):  # a bare .npy saved under an .npz name
                raise ValueError("a single array, not an archive of named arrays")
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"{path}: not a readable .npz file ({why})") from None
    return arrays


def _read_csv(path: Path) -> dict[str, list[str]]:
    """The columns of a UTF-8 CSV (a byte-order mark, as spreadsheet programs write, is
    dropped); text in another encoding is an error naming the file and the first bad byte."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ValueError(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} on line {line}); save "
            "the CSV as UTF-8"
        ) from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
        cols: dict[str, list[str]] = {h.strip(): [] for h in header}
        if len(cols) != len(header):
            raise ValueError(f"{path}: the header names a column twice ({', '.join(header)})")
        for line, row in enumerate(reader, start=2):
            if len(row) != len(header):
                raise ValueError(
                    f"{path}: line {line} has {len(row)} fields, the header has {len(header)}"
                )
            for h, v in zip(cols, row, strict=True):
                cols[h].append(v)
    except StopIteration:
        raise ValueError(f"{path}: empty CSV file") from None
    except csv.Error as exc:
        raise ValueError(f"{path}: not a readable CSV file ({exc})") from None
    return cols


def _read_parquet(path: Path) -> dict[str, list[Any]]:
    _, pq = _pyarrow()
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises its own error types
        raise ValueError(f"{path}: not a readable Parquet file ({exc})") from exc
    return {name: table.column(name).to_pylist() for name in table.column_names}


def _columns_to_arrays(cols: Mapping[str, list[Any]], path: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    scores: dict[str, dict[int, list[Any]]] = {"prob": {}, "logit": {}}
    for name, values in cols.items():
        m = _COLUMN.match(name)
        if m:
            scores[m.group(1)][int(m.group(2))] = values
        elif name == "label":
            out["labels"] = _numbers(values, name, path, integer=True)
        else:
            out[name] = np.asarray([str(v) for v in values])
    for prefix, key in (("prob", "probs"), ("logit", "logits")):
        found = scores[prefix]
        if not found:
            continue
        missing = sorted(set(range(max(found) + 1)) - set(found))
        if missing:
            raise ValueError(f"{path}: column {prefix}_{missing[0]} is missing")
        out[key] = np.stack(
            [_numbers(found[c], f"{prefix}_{c}", path) for c in range(len(found))], axis=1
        )
    return out


def _numbers(values: list[Any], column: str, path: Path, *, integer: bool = False) -> np.ndarray:
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        try:
            out[i] = float("nan") if v is None or v == "" else float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{path}: row {i}, column {column}: {v!r} is not a number") from None
    if integer:
        bad = np.flatnonzero(~np.isfinite(out) | (out != np.round(out)))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{path}: row {i}: label {values[i]!r} is not an integer class index")
        return out.astype(np.int64)
    return out


def _to_columns(pred: Predictions) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {"label": pred.labels.tolist()}
    for c in range(pred.n_classes):
        cols[f"prob_{c}"] = pred.probs[:, c].tolist()
    if pred.logits is not None:
        for c in range(pred.n_classes):
            cols[f"logit_{c}"] = pred.logits[:, c].tolist()
    for name, values in pred.groups.items():
        if name in cols or _COLUMN.match(name):
            raise ValueError(f"group column {name!r} clashes with a score column")
        cols[name] = [str(v) for v in values.tolist()]
    return cols


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(
            "reading or writing Parquet predictions needs pyarrow: pip install 'medibench[parquet]'"
        ) from exc
    return pa, pq
