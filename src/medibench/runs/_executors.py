"""Executors: where the generate and score stages do their work.

- :class:`LocalExecutor` (``--executor local``): in this process. One worker runs the items one
  after another, in batches of same-size images when the model has ``edit_batch`` and a
  ``batch_size`` above 1. More workers (``--workers N``) keep N items in flight: on one event loop
  for models with an async ``aedit`` (the API adapters), on a thread pool otherwise.
- :class:`RayExecutor` (``--executor ray``): one Ray actor per GPU (or ``workers`` actors) builds
  the model once and pulls batches of work; scoring runs as Ray tasks over shards of samples.

Either way the caller's thread writes every row of the run store, one transaction per item, after
the item's PNG is atomically in place (:func:`medibench.runs.generate`).
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from medibench.io import atomic_write_bytes, read_image, write_image
from medibench.samples import Prediction, Sample

__all__ = ["LocalExecutor", "Outcome", "RayExecutor", "Task", "edit_tasks"]


@dataclass(frozen=True)
class Task:
    """One output to make: draw ``k`` of ``sample``, with its derived ``seed``."""

    sample: Sample
    k: int
    seed: int

    @property
    def filename(self) -> str:
        return f"{self.sample.sample_id}_{self.k}.png"


@dataclass(frozen=True)
class Outcome:
    """What became of a task: the written file, or the error that stopped it."""

    task: Task
    path: Path | None
    error: str | None
    elapsed_s: float


class LocalExecutor:
    """Run the model in this process with ``workers`` items in flight (see the module doc).

    ``workers=None`` uses the model's own ``concurrency`` (the API adapters set one), else 1.
    """

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers

    def generate(self, model, tasks: Sequence[Task], out_dir: Path) -> Iterator[Outcome]:
        """Make every task's output in ``out_dir``; yield outcomes as they finish."""
        workers = self.workers or int(getattr(model, "concurrency", 1) or 1)
        if workers > 1 and hasattr(model, "aedit"):
            if self.workers and hasattr(model, "concurrency"):
                model.concurrency = max(model.concurrency, self.workers)
            yield from _generate_async(model, tasks, out_dir, workers)
        elif workers > 1:
            yield from _generate_threads(model, tasks, out_dir, workers)
        else:
            size = max(1, int(getattr(model, "batch_size", 1) or 1))
            for start in range(0, len(tasks), size):
                chunk = list(tasks[start : start + size])
                images = [_read_input(t) for t in chunk]
                for task, (image, error, elapsed) in zip(
                    chunk, edit_tasks(model, chunk, images), strict=True
                ):
                    yield _write_outcome(task, image, error, elapsed, out_dir)

    def score(self, root: Path, samples: dict[str, Sample], preds, protocol, load_images):
        """Score ``preds`` (sorted by sample) one after another; yield score records."""
        from medibench.runs._runner import score_one

        cache: dict[str, Any] = {}
        for pred in preds:
            yield score_one(root, samples[pred.sample_id], pred, protocol, load_images, cache)

    def close(self) -> None:
        pass


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
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
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
        todo = iter(range(0, len(tasks), self._batch))
        pending: dict[Any, tuple[Any, list[Task], float]] = {}

        def submit(actor) -> bool:
            start = next(todo, None)
            if start is None:
                return False
            chunk = list(tasks[start : start + self._batch])
            images = [_read_input(t) for t in chunk]
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
                results = [(None, _describe(exc), 0.0)] * len(chunk)
            for task, (png, error, elapsed) in zip(chunk, results, strict=True):
                path = None
                if png is not None:
                    path = atomic_write_bytes(out_dir / task.filename, png)
                yield Outcome(task, path, error, elapsed)
            submit(actor)

    def score(self, root: Path, samples: dict[str, Sample], preds, protocol, load_images):
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


def edit_tasks(
    model, tasks: Sequence[Task], images: Sequence[np.ndarray | str]
) -> list[tuple[np.ndarray | None, str | None, float]]:
    """Run ``model`` on tasks whose inputs are ``images`` (or a read error); per task return
    ``(image, error, seconds)``.

    Same-size inputs go to ``model.edit_batch`` together when the model has one; if a batch
    fails, its items are retried one by one so one bad sample fails alone.
    """
    results: list[tuple[np.ndarray | None, str | None, float] | None] = [None] * len(tasks)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, image in enumerate(images):
        if isinstance(image, str):
            results[i] = (None, image, 0.0)
        else:
            groups.setdefault(image.shape, []).append(i)
    batched = hasattr(model, "edit_batch") and getattr(model, "batch_size", 1) > 1
    for idx in groups.values():
        if batched and len(idx) > 1:
            t0 = time.perf_counter()
            try:
                outs = model.edit_batch(
                    [images[i] for i in idx],
                    [tasks[i].sample.instruction for i in idx],
                    seeds=[tasks[i].seed for i in idx],
                )
                each = (time.perf_counter() - t0) / len(idx)
                for i, out in zip(idx, outs, strict=True):
                    results[i] = (out, None, each)
                continue
            except Exception:  # retried one by one below, so the failure lands on its sample
                pass
        for i in idx:
            results[i] = _edit_one(model, tasks[i], images[i])
    return results  # type: ignore[return-value]


# -- local helpers --------------------------------------------------------------------------
def _edit_one(model, task: Task, image: np.ndarray):
    t0 = time.perf_counter()
    try:
        out = model.edit(image, task.sample.instruction, seed=task.seed)
    except Exception as exc:  # recorded on the sample; the run goes on
        return None, _describe(exc), time.perf_counter() - t0
    return out, None, time.perf_counter() - t0


def _read_input(task: Task) -> np.ndarray | str:
    try:
        return read_image(task.sample.input, mode="rgb")
    except Exception as exc:  # an unreadable input is that sample's failure
        return _describe(exc)


def _write_outcome(task, image, error, elapsed, out_dir: Path) -> Outcome:
    if error is not None:
        return Outcome(task, None, error, elapsed)
    try:
        path = write_image(out_dir / task.filename, _check_output(image))
    except Exception as exc:
        return Outcome(task, None, _describe(exc), elapsed)
    return Outcome(task, path, None, elapsed)


def _check_output(image: Any) -> np.ndarray:
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] > 4):
        raise ValueError(
            f"the model returned {arr.dtype} pixels of shape {arr.shape}; expected uint8 "
            "(H, W), (H, W, 3) or (H, W, 4)"
        )
    return arr


def _one_item(model, task: Task, out_dir: Path) -> Outcome:
    image = _read_input(task)
    if isinstance(image, str):
        return Outcome(task, None, image, 0.0)
    out, error, elapsed = _edit_one(model, task, image)
    return _write_outcome(task, out, error, elapsed, out_dir)


def _generate_threads(model, tasks, out_dir: Path, workers: int) -> Iterator[Outcome]:
    it = iter(tasks)
    with ThreadPoolExecutor(workers, thread_name_prefix="medibench-edit") as pool:
        futures = {pool.submit(_one_item, model, t, out_dir) for t in _take(it, workers * 2)}
        while futures:
            done, futures = wait(futures, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()
            futures |= {pool.submit(_one_item, model, t, out_dir) for t in _take(it, len(done))}


def _generate_async(model, tasks, out_dir: Path, workers: int) -> Iterator[Outcome]:
    """N coroutines pull tasks and call ``model.aedit``; outcomes come back through a queue so
    the caller's thread does the store writes."""
    results: queue.Queue = queue.Queue()
    done = object()

    async def one(task: Task) -> Outcome:
        image = await asyncio.to_thread(_read_input, task)
        if isinstance(image, str):
            return Outcome(task, None, image, 0.0)
        t0 = time.perf_counter()
        try:
            out = await model.aedit(image, task.sample.instruction, seed=task.seed)
        except Exception as exc:  # recorded on the sample; the run goes on
            return Outcome(task, None, _describe(exc), time.perf_counter() - t0)
        elapsed = time.perf_counter() - t0
        return await asyncio.to_thread(_write_outcome, task, out, None, elapsed, out_dir)

    async def main() -> None:
        it = iter(tasks)

        async def worker() -> None:
            for task in it:  # a shared iterator: each task goes to one worker
                results.put(await one(task))

        try:
            await asyncio.gather(*(worker() for _ in range(workers)))
        finally:
            if hasattr(model, "aclose"):
                await model.aclose()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # surfaced in the caller's thread
            results.put(exc)
        results.put(done)

    thread = threading.Thread(target=run, name="medibench-api", daemon=True)
    thread.start()
    while (item := results.get()) is not done:
        if isinstance(item, BaseException):
            raise item
        yield item
    thread.join()


def _take(it: Iterator[Task], n: int) -> list[Task]:
    out = []
    for _ in range(n):
        task = next(it, None)
        if task is None:
            break
        out.append(task)
    return out


def _describe(exc: BaseException) -> str:
    from medibench.runs._runner import _describe as describe

    return describe(exc)


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
        import cv2

        out = []
        for image, error, elapsed in edit_tasks(self.model, tasks, images):
            if error is None:
                try:
                    arr = _check_output(image)
                    if arr.ndim == 3:
                        code = cv2.COLOR_RGB2BGR if arr.shape[2] == 3 else cv2.COLOR_RGBA2BGRA
                        arr = cv2.cvtColor(arr, code)
                    ok, buf = cv2.imencode(".png", np.ascontiguousarray(arr))
                    out.append((buf.tobytes(), None, elapsed))
                    continue
                except Exception as exc:
                    error = _describe(exc)
            out.append((None, error, elapsed))
        return out


def _score_shard(root: str, samples: list[Sample], preds: list[Prediction], protocol, load_images):
    from medibench.runs._runner import score_one

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


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise ImportError("--executor ray needs Ray: pip install 'medibench[ray]'") from exc
    return ray
