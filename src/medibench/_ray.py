"""What every ``--executor ray`` command shares: joining the cluster, and telling work lost
with a node (a dead actor or worker, a node gone, an object lost with it) from a sample's own
error.

Lost work is an infrastructure failure, never a result: it is done again on the workers that
are left, at most :data:`LOST_WORK_ATTEMPTS` times in all, and then the command stops with a
:class:`LostWorkError` (what finished is kept, and the same command resumes). Ray is imported
only when a function here is called, so importing this module needs no Ray.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = [
    "LOST_WORK_ATTEMPTS",
    "LostWorkError",
    "RayClusterNotFoundError",
    "import_ray",
    "is_lost_work",
    "join_cluster",
    "lost_work",
    "run_tasks",
]

#: Attempts in all at one piece of work whose Ray worker or node is lost before a command stops.
LOST_WORK_ATTEMPTS = 3


class LostWorkError(RuntimeError):
    """Work lost with its Ray workers too often (or with every worker): the command stops."""


class RayClusterNotFoundError(ConnectionError):
    """``--ray-address`` names no running Ray cluster."""


def import_ray() -> Any:
    """The ``ray`` module, or an ImportError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError("--executor ray needs Ray: pip install 'medibench[ray]'") from exc
    return ray


def join_cluster(address: str | None = None) -> Any:
    """Join the Ray cluster at ``address`` (``None``: ``RAY_ADDRESS``, else a new instance on
    this machine) unless this process already has; the ``ray`` module."""
    ray = import_ray()
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except ConnectionError as exc:  # no cluster at that address: say what to do
            raise RayClusterNotFoundError(
                f"no Ray cluster found at --ray-address {address}: start one with "
                "'ray start --head', or drop --ray-address to run Ray on this machine"
            ) from exc
    return ray


def is_lost_work(exc: BaseException) -> bool:
    """Whether ``exc`` (raised by ``ray.get``) says the work was lost with its worker or node,
    rather than raised by the work itself."""
    import ray.exceptions as rex

    lost = (rex.RayActorError, rex.WorkerCrashedError, rex.NodeDiedError, rex.ObjectLostError,
            rex.LocalRayletDiedError)  # fmt: skip
    return isinstance(exc, lost)


def lost_work(what: str, exc: BaseException, attempts: int = LOST_WORK_ATTEMPTS) -> LostWorkError:
    """The error that stops a command: ``what`` was lost with its Ray worker ``attempts`` times."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    why = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return LostWorkError(
        f"{what} was lost with its Ray worker {attempts} time(s), last: {why}; finished work is "
        "kept: run the same command again to resume"
    )


def run_tasks(
    fn: Callable[..., Any],
    jobs: Iterable[tuple[str, tuple[Any, ...]]],
    *,
    kind: str,
    num_gpus: float = 0,
    **options: Any,
) -> Iterator[tuple[str, Any]]:
    """Run ``fn(*args)`` as one Ray task (one CPU, ``num_gpus``, Ray's task ``options``) per
    ``(name, args)`` of ``jobs``; yield ``(name, result)`` as each finishes; ``kind`` says what
    a name is (``"build item"``).

    A task lost with its worker or node is run again by Ray on the workers left, up to
    :data:`LOST_WORK_ATTEMPTS` attempts in all; after that the tasks still running are
    cancelled and :class:`LostWorkError` names the one lost. ``fn`` reports its own failures
    in its result (an exception it raises is re-raised here)."""
    ray = import_ray()
    retries = LOST_WORK_ATTEMPTS - 1
    task = ray.remote(num_cpus=1, num_gpus=num_gpus, max_retries=retries, **options)(fn)
    refs = {task.remote(*args): name for name, args in jobs}
    try:
        while refs:
            (ref,), _ = ray.wait(list(refs), num_returns=1)
            name = refs.pop(ref)
            try:
                result = ray.get(ref)
            except Exception as exc:
                if is_lost_work(exc):
                    raise lost_work(f"{kind} {name}", exc) from exc
                raise
            yield name, result
    finally:
        for ref in refs:  # stopped early: what is still running goes, it writes nothing more
            ray.cancel(ref, force=True)
