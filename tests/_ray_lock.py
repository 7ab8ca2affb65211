"""One local Ray instance at a time in a test session, whatever the xdist workers do.

A test that starts Ray (``ray.init``, a ``ray.cluster_utils.Cluster``) does so inside
:func:`only_ray_instance`: an exclusive ``flock`` on one file per test run (the xdist workers of
a run share ``PYTEST_XDIST_TESTRUNUID``), so a second Ray instance waits until the first is shut
down; an instance this process left running is shut down first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def only_ray_instance() -> Iterator[None]:
    """Hold the test run's Ray lock for the block; Ray is shut down when it ends."""
    import ray

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    path = Path(tempfile.gettempdir()) / f"medibench-tests-ray-{run}.lock"
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
