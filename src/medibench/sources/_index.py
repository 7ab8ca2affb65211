"""What a read of Parquet shards found, kept beside its image cache so the next read is cheap.

An adapter that turns Parquet rows into records pointing at stored image files (the cells'
bytes written once) pays, on every load, for reading every row and hashing every image. The
result of that step is a small JSON value; :func:`cached_read` keeps it in ``index.json`` in the
cache folder, keyed by the shards' names, sizes and modification times, and returns it instead
of reading again while the shards are unchanged and every file it points at still exists.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from medibench.io import atomic_write_text

__all__ = ["INDEX", "cached_read"]

#: The index file, inside the adapter's cache folder.
INDEX = "index.json"
_FORMAT = "medibench-shard-index/1"


def cached_read(
    cache: Path,
    files: Sequence[Path],
    read: Callable[[], Any],
    *,
    paths: Callable[[Any], Iterable[str]],
    what: str = "",
) -> Any:
    """``read()``, or what it returned last time for the same shards.

    ``cache``: the adapter's cache folder (the index goes in ``cache/index.json``); ``files``:
    the shards read; ``read``: the reading step, returning a JSON value (lists, dicts, strings,
    numbers; tuples come back as lists); ``paths``: the files that value points at (all must
    still exist for it to be reused); ``what``: tells two reading steps sharing one cache folder
    apart. A cache folder that cannot be written only loses the shortcut.
    """
    key = {"format": _FORMAT, "what": what, "shards": [_stat(f) for f in files]}
    index = cache / (f"{what}-{INDEX}" if what else INDEX)
    try:
        stored = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = None
    if isinstance(stored, dict) and stored.get("key") == key:
        value = stored.get("value")
        if all(Path(p).is_file() for p in paths(value)):
            return value
    value = read()
    try:
        text = json.dumps({"key": key, "value": value})
    except (TypeError, ValueError):  # a value JSON cannot hold: used as it is, not kept
        return value
    try:
        atomic_write_text(index, text)
    except OSError:
        pass
    return json.loads(text)["value"]  # the same shape a cached read gives


def _stat(file: Path) -> list[Any]:
    st = file.stat()
    return [str(file.resolve()), st.st_size, st.st_mtime_ns]
