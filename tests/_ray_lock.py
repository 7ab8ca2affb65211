"""One local Ray instance at a time in a test session, whatever the xdist workers do.

A test that starts Ray (``ray.init``, a ``ray.cluster_utils.Cluster``) does so inside
:func:`only_ray_instance`: an exclusive ``flock`` on one file in the temp folder (shared by the
xdist workers, and by test sessions running side by side on the machine), so a second Ray
instance waits until the first is shut down; an instance this process left running is shut
down first.

Such a test is also marked :data:`RAY_GROUP` (``xdist_group("ray")``): ``make test`` runs
``--dist loadgroup``, which hands every test of the group to one worker, one after another, so
no worker sits waiting on the lock while another one's Ray test runs (checked: a test that takes
the lock without the mark fails, naming it).
"""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: The mark of every test that starts Ray: one xdist worker runs them all, one after another.
RAY_GROUP = pytest.mark.xdist_group("ray")
#: The test being set up or run (tests/conftest.py sets it).
CURRENT: list[Any] = [None]


def _in_the_ray_group(item: Any) -> bool:
    marks = item.iter_markers("xdist_group")
    names = {m.args[0] if m.args else m.kwargs.get("name") for m in marks}
    return RAY_GROUP.args[0] in names


@contextlib.contextmanager
def only_ray_instance() -> Iterator[None]:
    """Hold the machine's test Ray lock for the block; Ray is shut down when it ends."""
    import ray

    item = CURRENT[0]
    if item is not None and not _in_the_ray_group(item):
        raise RuntimeError(
            f"{item.nodeid} starts Ray without @pytest.mark.xdist_group(\"ray\"): mark it so "
            "that one xdist worker runs every Ray test (tests/_ray_lock.py)"
        )
    path = Path(tempfile.gettempdir()) / "medibench-tests-ray.lock"
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            if ray.is_initialized():
                ray.shutdown()
            yield
        finally:
            if ray.is_initialized():
                ray.shutdown()
            fcntl.flock(fh, fcntl.LOCK_UN)
