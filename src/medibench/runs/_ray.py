"""The Ray executor (``--executor ray``): model actors for generation, Ray tasks for scoring.

One Ray actor per GPU (or ``workers`` actors) builds the model once and pulls batches of work;
scoring runs as Ray tasks over shards of samples. Ray is imported only when a
:class:`RayExecutor` is made, so ``import medibench.runs`` works without it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from medibench.io import atomic_write_bytes, encode_image
from medibench.runs._work import (
    Outcome,
    Task,
    batches,
    check_output,
    describe,
    edit_tasks,
    read_input,
    score_one,
)
from medibench.samples import Prediction, Sample

__all__ = ["RayClusterNotFoundError", "RayExecutor"]


class RayClusterNotFoundError(ConnectionError):
    """``--ray-address`` names no running Ray cluster."""


class RayExecutor:
    """Generate with Ray actors that each hold a loaded model; score with Ray tasks.

    Args:
        workers: number of model actors (default: one per GPU in the cluster, else 1).
        address: a Ray cluster to join (``ray start --head`` prints it; ``"auto"`` finds a local
            one); ``None`` joins the instance this process already started, or starts one.
        gpus_per_worker: GPUs each actor reserves (default 1 when the cluster has GPUs, else 0).
        threads: CPU threads per actor for torch/OpenCV (1).

    Inputs are read by the driver and sent to the actors, and outputs come back as PNG bytes
    the driver writes, so the actors' machines need no access to the run folder. Scoring tasks
    read the dataset and the run folder, so they are pinned to the driver's machine.
    """

    name = "ray"

    def __init__(
        self,
        *,
        workers: int | None = None,
        address: str | None = None,
        gpus_per_worker: float | None = None,
        threads: int = 1,
    ) -> None:
        ray = _import_ray()
        if not ray.is_initialized():
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except ConnectionError as exc:  # no cluster at that address: say what to do
                raise RayClusterNotFoundError(
                    f"no Ray cluster found at --ray-address {address}: start one with "
                    "'ray start --head', or drop --ray-address to run Ray on this machine"
                ) from exc
        gpus = float(ray.cluster_resources().get("GPU", 0))
        if gpus_per_worker is None:
            gpus_per_worker = 1.0 if gpus else 0.0
        self.gpus_per_worker = gpus_per_worker
        per_gpu = int(gpus // gpus_per_worker) if gpus and gpus_per_worker else 1
        self.workers = workers or max(1, per_gpu)
        self.threads = threads
        self._actors: list[Any] = []
        self._model_key: Any = None
        self._batch = 1
        self.model_name: str | None = None

    def start(self, model) -> str:
        """Start the actors with ``model`` (a ``ModelSpec``, or a picklable model); its name."""
        ray = _import_ray()
        key = _model_key(model)
        if self._actors and key == self._model_key:
            return self.model_name or ""
        self.close()
        actor_cls = ray.remote(
            num_cpus=self.threads,
            num_gpus=self.gpus_per_worker,
            runtime_env={"env_vars": _thread_env(self.threads)},
        )(_ModelWorker)
        self._actors = [actor_cls.remote(model, self.threads) for _ in range(self.workers)]
        infos = ray.get([a.info.remote() for a in self._actors])
        self.model_name, self._batch = infos[0]
        self._model_key = key
        return self.model_name

    def generate(self, model, tasks: Sequence[Task], out_dir: Path) -> Iterator[Outcome]:
        """Keep two batches queued per actor; write each returned PNG, yield its outcome."""
        ray = _import_ray()
        self.start(model)
        todo = iter(batches(tasks, self._batch))  # one input size per batch
        pending: dict[Any, tuple[Any, list[Task], float]] = {}

        def submit(actor) -> bool:
            chunk = next(todo, None)
            if chunk is None:
                return False
            images = [read_input(t) for t in chunk]
            pending[actor.run.remote(chunk, images)] = (actor, chunk, time.perf_counter())
            return True

        for actor in self._actors:
            submit(actor) and submit(actor)
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            actor, chunk, _t0 = pending.pop(ref)
            try:
                results = ray.get(ref)
            except Exception as exc:  # the actor died: the chunk fails, the run goes on
                results = [(None, describe(exc), 0.0)] * len(chunk)
            for task, (png, error, elapsed) in zip(chunk, results, strict=True):
                path = None
                if png is not None:
                    path = atomic_write_bytes(out_dir / task.filename, png)
                yield Outcome(task, path, error, elapsed)
            submit(actor)

    def score(self, root: Path, samples: dict[str, Sample], preds, protocol, load_images=None):
        """Score shards of ``preds`` (whole samples per shard) as Ray tasks on this machine.

        The model actors are stopped first: generation is over, and they hold CPUs and GPUs.
        """
        ray = _import_ray()
        self.close()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        preds = list(preds)
        if not preds:
            return
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        shards = _shards_by_sample(preds, parts=cpus * 4)
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        task = ray.remote(num_cpus=1, scheduling_strategy=here)(_score_shard)
        refs = [
            task.remote(
                str(root),
                [samples[s] for s in {p.sample_id: 0 for p in sh}],
                sh,
                protocol,
                load_images,
            )
            for sh in shards
        ]
        while refs:
            done, refs = ray.wait(refs, num_returns=1)
            yield from ray.get(done[0])

    def close(self) -> None:
        """Stop the model actors (the Ray instance stays up)."""
        if self._actors:
            ray = _import_ray()
            for actor in self._actors:
                ray.kill(actor)
            self._actors = []
            self._model_key = None


# -- Ray helpers ----------------------------------------------------------------------------
class _ModelWorker:
    """A Ray actor holding one loaded model."""

    def __init__(self, model, threads: int) -> None:
        _limit_threads(threads)
        from medibench.models._spec import ModelSpec

        self.model = model.load() if isinstance(model, ModelSpec) else model
        _limit_threads(threads)  # loading may have imported torch

    def info(self) -> tuple[str, int]:
        return self.model.name, max(1, int(getattr(self.model, "batch_size", 1) or 1))

    def run(self, tasks: list[Task], images: list) -> list[tuple[bytes | None, str | None, float]]:
        out: list[tuple[bytes | None, str | None, float]] = []
        for image, error, elapsed in edit_tasks(self.model, tasks, images):
            if error is None:
                try:
                    out.append((encode_image(check_output(image)), None, elapsed))
                    continue
                except Exception as exc:
                    error = describe(exc)
            out.append((None, error, elapsed))
        return out


def _score_shard(root: str, samples: list[Sample], preds: list[Prediction], protocol, load_images):
    by_id = {s.sample_id: s for s in samples}
    cache: dict[str, Any] = {}
    return [
        score_one(Path(root), by_id[p.sample_id], p, protocol, load_images, cache) for p in preds
    ]


def _shards_by_sample(preds: Sequence[Prediction], parts: int) -> list[list[Prediction]]:
    size = max(1, -(-len(preds) // parts))
    shards: list[list[Prediction]] = [[]]
    for i, pred in enumerate(preds):
        same_sample = i and pred.sample_id == preds[i - 1].sample_id
        if len(shards[-1]) >= size and not same_sample:
            shards.append([])
        shards[-1].append(pred)
    return shards


def _model_key(model) -> Any:
    from medibench.models._spec import ModelSpec

    if isinstance(model, ModelSpec):
        return ("spec", model.model, repr(sorted(model.options.items())))
    return ("object", id(model))


def _thread_env(threads: int) -> dict[str, str]:
    n = str(threads)
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n}


def _limit_threads(threads: int) -> None:
    os.environ.update(_thread_env(threads))
    import sys

    import cv2

    cv2.setNumThreads(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def remote_function(fn: Any, *, address: str | None = None, num_cpus: float = 1,
                    num_gpus: float = 0) -> Any:  # fmt: skip
    """``fn`` as a Ray remote function with these resources, joining the cluster at
    ``address`` (``None``: the instance this process started, or a new local one) first."""
    ray = _import_ray()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    return ray.remote(num_cpus=num_cpus, num_gpus=num_gpus)(fn)


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise ImportError("--executor ray needs Ray: pip install 'medibench[ray]'") from exc
    return ray
