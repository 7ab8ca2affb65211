"""A Ray cluster that loses a node (issue 41): a head and two worker nodes of one CPU each, on
this machine and every node on 127.0.0.1, runs ``run --executor ray``, ``build --executor ray``
and a ``calibration grid``; one worker node is removed (its processes killed) in the middle of
each. Each ends with the store, outputs and tables of an uninterrupted local run: nothing lost,
nothing doubled, no half-written file."""

from __future__ import annotations

import contextlib
import csv
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.cli import app
from tests._kill import ROOT, folder_state, hidden_temps
from tests._ray_lock import RAY_GROUP, only_ray_instance
from tests._sqlite import table_rows
from tests.build.conftest import mni_png_source
from tests.prompt_tuning.conftest import _tiny_backbone, write_folder_dataset
from tests.prompt_tuning.test_grid import write_config
from tests.runs.conftest import make_native

# a three-node cluster: about 20 s to start; one worker runs every Ray test (tests/_ray_lock.py)
pytestmark = [pytest.mark.slow(seconds=50), RAY_GROUP]
runner = CliRunner()
LOOPBACK = "127.0.0.1"
#: A killed node is known dead within seconds (Ray's defaults take up to a minute).
HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_timeout_ms": 2000,
                 "health_check_failure_threshold": 3}  # fmt: skip


class SlowNoise:
    """An editor that takes a while (a run to lose a node in): the input plus seeded noise."""

    name = "slow-noise"

    def edit(self, image, instruction, *, seed):
        time.sleep(0.2)
        noise = np.random.default_rng(seed).integers(-20, 21, image.shape)
        return np.clip(image.astype(np.int64) + noise, 0, 255).astype(np.uint8)


def slow_noise() -> SlowNoise:
    return SlowNoise()


def test_a_cluster_that_loses_a_node_loses_no_work(tmp_path):
    """One cluster for the three commands (one test, so xdist never starts it twice)."""
    pytest.importorskip("nilearn")  # the build's source
    for name in ("run", "build", "grid"):
        (tmp_path / name).mkdir()
    with _cluster() as cluster:
        _a_run_that_loses_a_node_equals_the_local_run(cluster, tmp_path / "run")
        _a_build_that_loses_a_node_equals_the_local_build(cluster, tmp_path / "build")
        _a_grid_that_loses_a_node_equals_the_local_grid(cluster, tmp_path / "grid")


@contextlib.contextmanager
def _cluster() -> Iterator[Any]:
    """A head and one worker node (one CPU each) on 127.0.0.1, this process its driver; each
    command adds the worker node it loses."""
    ray = pytest.importorskip("ray")
    import ray._private.ray_constants as constants
    from ray.cluster_utils import Cluster

    with only_ray_instance(), pytest.MonkeyPatch.context() as mp:
        # Ray would join 127.0.0.1 through the host's own address; the nodes listen on loopback
        mp.setattr(constants, "ENABLE_RAY_CLUSTER", False)
        mp.setenv("PYTHONPATH", f"{ROOT / 'src'}:{ROOT}")  # the workers import the tests' models
        head = {"num_cpus": 1, "node_ip_address": LOOPBACK, "include_dashboard": False,
                "_system_config": HEALTH_CHECKS}  # fmt: skip
        nodes = Cluster(initialize_head=True, connect=True, head_node_args=head)
        try:
            nodes.add_node(num_cpus=1, node_ip_address=LOOPBACK)
            yield nodes
        finally:
            ray.shutdown()  # the driver first: it may be attached to any node on 127.0.0.1
            nodes.shutdown()


def _a_run_that_loses_a_node_equals_the_local_run(cluster, tmp_path):
    data = make_native(tmp_path / "data", n=18, size=24)
    model = "tests.runs.test_ray_cluster:slow_noise"
    argv = ["run", "--dataset", f"native:{data}", "--model", model, "--no-progress"]
    ref, out = tmp_path / "local" / "run", tmp_path / "ray" / "run"
    _ok(*argv, "--run", ref, "--workers", "6")  # six threads: the same outputs, sooner
    outputs = out / "outputs"
    with _losing_a_node(cluster, lambda: len(list(outputs.rglob("*.png"))) >= 3):
        _ok(*argv, "--run", out, "--executor", "ray", "--workers", "3")
    drop = ("elapsed_s", "created_at")
    for table in ("predictions", "scores"):
        rows = table_rows(out / "run.sqlite", table, drop=drop)
        assert len(rows) == 18 and rows == table_rows(ref / "run.sqlite", table, drop=drop)
    assert {r[5] for r in table_rows(out / "run.sqlite", "predictions")} == {"ok"}
    assert folder_state(out) == folder_state(ref) and hidden_temps(out) == []


def _a_build_that_loses_a_node_equals_the_local_build(cluster, tmp_path):
    source = mni_png_source(tmp_path / "src", patients=6, per_patient=1,
                            extra="lesions: [white matter]\n")  # fmt: skip
    argv = ["build", "modification", "--source", source, "--inpainter",
            "tests.build.test_cli:slow_inpainter", "--export", "native"]  # fmt: skip
    ref, out = tmp_path / "local" / "out", tmp_path / "ray" / "out"
    _ok(*argv, "--out", ref)
    items = out / ".build" / "items"
    with _losing_a_node(cluster, lambda: len(list(items.glob("*.json"))) >= 1):
        _ok(*argv, "--out", out, "--executor", "ray")
    state = folder_state(out)
    assert len([k for k in state if k.startswith(".build/items/")]) == 6
    assert state == folder_state(ref) and hidden_temps(out) == []


def _a_grid_that_loses_a_node_equals_the_local_grid(cluster, tmp_path):
    dataset = write_folder_dataset(tmp_path / "skin")
    config = write_config(tmp_path, dataset, _tiny_backbone("clip"))
    text = config.read_text().replace("methods: [zero-shot, linear-probe, coop]", "methods: [coop]")
    config.write_text(text.replace('losses: [ce, "mcm:alpha=0.1,beta=0.01"]', "losses: [ce]"))
    ref, out = tmp_path / "local" / "grid", tmp_path / "ray" / "grid"
    _ok("calibration", "grid", config, "--out", ref)
    cells = out / "cells"
    with _losing_a_node(cluster, lambda: len(list(cells.rglob("done.json"))) >= 1):
        _ok("calibration", "grid", config, "--out", out, "--executor", "ray")
    tables = [list(csv.reader((f / "tables" / "cells.csv").open())) for f in (out, ref)]
    assert len(tables[0]) == 1 + 4 * 2 and tables[0] == tables[1]  # 4 cells, 2 eval sets
    assert len(list(cells.rglob("done.json"))) == 4 and hidden_temps(out) == []


def _ok(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res


@contextlib.contextmanager
def _losing_a_node(cluster, when: Callable[[], bool]) -> Iterator[None]:
    """Add a worker node (one CPU) for the block, and kill it as soon as ``when()`` holds while
    the block's command runs; fails if that moment never came before the command ended."""
    node = cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK)
    cluster.wait_for_nodes()
    done, removed = threading.Event(), threading.Event()

    def watch() -> None:
        while not done.is_set():
            if when():
                cluster.remove_node(node, allow_graceful=False)
                removed.set()
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
    assert removed.is_set(), "the node was never removed: the command ended first"
