"""Building a generated dataset: assembled in a temporary sibling folder, renamed into place.

Shared by :mod:`medibench.synth.suite` and :mod:`medibench.synth.starter`, so a reader of the
output folder never sees half a dataset.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["building"]


@contextmanager
def building(out: Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``out``; when the block ends, it becomes ``out``.

    ``out`` may exist: the caller has checked that it may be replaced (empty, or a dataset that
    ``overwrite`` allows deleting). On any error the temporary folder is removed and ``out`` is
    left as it was.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        yield work
        if out.exists():
            if any(out.iterdir()):
                shutil.rmtree(out)
            else:
                out.rmdir()
        os.replace(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
