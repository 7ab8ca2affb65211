"""One local Ray instance at a time in a test session, whatever the xdist workers do.

A test that starts Ray (``ray.init``, a ``ray.cluster_utils.Cluster``) does so inside
:func:`only_ray_instance`: an exclusive ``flock`` on one file in the temp folder (shared by the
xdist workers, and by test sessions running side by side on the machine), so a second Ray
instance waits until the first is shut down; an instance this process left running is shut
down first.
"""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def only_ray_instance() -> Iterator[None]:
    """Hold the machine's test Ray lock for the block; Ray is shut down when it ends."""
    import ray

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
