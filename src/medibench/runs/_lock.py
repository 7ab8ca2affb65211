"""One process per run folder: an advisory ``flock`` on ``RUN/.lock``.

Every stage that writes a run folder (``run``, ``judge``, ``report``, ``merge``, ``build``,
``edit run``, ``calibration score --run``) holds the lock for as long as it works. The kernel
drops an ``flock`` when its process dies, so a SIGKILLed run never leaves a stale lock; the PID
in the file is only there to name the holder. Taking the lock removes the hidden temporary
files (``.NAME.XXXX.tmp``) a killed writer left in the folder (``outputs/``, ``exports/``, ...):
no writer can be running then.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from medibench.io._write import remove_stale_temps

try:
    import fcntl
except ImportError:  # Windows: no flock; runs there are not protected
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILENAME", "RunFolderInUse", "run_folder_lock"]

LOCK_FILENAME = ".lock"

# Held locks of this process, so a command that calls two locked stages (the demo's run then its
# report) takes the same lock twice: flock on a second descriptor would block on itself.
_held: dict[Path, list[int]] = {}
_guard = threading.Lock()


class RunFolderInUse(RuntimeError):
    """Another process holds the run folder's lock."""

    def __init__(self, run_dir: Path, pid: int | None) -> None:
        self.run_dir, self.pid = run_dir, pid
        who = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"run folder {run_dir} is in use by {who}")


@contextlib.contextmanager
def run_folder_lock(run_dir: str | os.PathLike, *, create: bool = True) -> Iterator[Path]:
    """Hold the run folder's lock for the ``with`` block; yield the lock file's path.

    Raises :class:`RunFolderInUse` at once (never waits) when another process holds it.
    ``create=False`` takes no lock on a folder that does not exist (the command will say it is
    not a run); otherwise the folder is created.
    """
    folder = Path(run_dir)
    path = folder / LOCK_FILENAME
    if fcntl is None or (not create and not folder.is_dir()):
        yield path
        return
    folder.mkdir(parents=True, exist_ok=True)
    key = path.resolve()
    with _guard:
        held = _held.get(key)
        if held is not None:
            held[1] += 1
        else:
            _held[key] = [_acquire(folder, path), 1]
            # no writer of this folder runs now: what a killed one left half-written goes
            remove_stale_temps(folder)
    try:
        yield path
    finally:
        with _guard:
            entry = _held[key]
            entry[1] -= 1
            if entry[1] == 0:
                del _held[key]
                os.close(entry[0])  # closing the descriptor releases the flock


def _acquire(folder: Path, path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _read_pid(fd)
        os.close(fd)
        raise RunFolderInUse(folder, pid) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):  # the holder has not written its PID yet
        return None
