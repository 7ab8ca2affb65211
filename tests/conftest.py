"""Shared test settings: one thread everywhere, no network."""

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

import cv2  # noqa: E402

cv2.setNumThreads(1)

from tests._cli_cache import install  # noqa: E402

install()  # CliRunner builds the click command of an unchanged app once (tests/_cli_cache.py)


@pytest.fixture(autouse=True)
def _no_api_base_url_from_the_shell(monkeypatch):
    """A developer's OPENAI_BASE_URL / GOOGLE_GEMINI_BASE_URL would send the tests' calls (and
    their expected defaults) elsewhere: each test sets them itself."""
    for name in ("OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def tiny_ip2p():
    """A tiny random InstructPix2Pix (tests/models/test_diffusers.py's builder, about 1 MB),
    built once per builder source (tests/_cache.py), shared by workers and sessions: read-only,
    copy it to change it."""
    pytest.importorskip("diffusers")
    from tests._cache import cached
    from tests.models.test_diffusers import build_tiny_ip2p

    return cached("tiny-ip2p", build_tiny_ip2p)


@pytest.fixture(scope="session")
def judged_report(tmp_path_factory):
    """The report (no plots) of a run judged by the real ``medibench judge`` against the local
    fake judge (tests/report/helpers.py's ``judged_run``: its run is ``<root>/run``, the page
    ``<root>/report/index.html``); read-only."""
    from medibench.report import build_report
    from tests.report.helpers import judged_run

    root = tmp_path_factory.mktemp("judged")
    return build_report(judged_run(root / "run"), root / "report", plots=False)


@pytest.fixture(scope="session")
def icl_run(tmp_path_factory):
    """An in-context run with K = 0, 1, 2 (tests/runs/icl_data.py's editor that averages its
    demonstrations' targets, its ten-sample dataset, native@1); read-only."""
    from medibench.runs import RunConfig, run
    from tests.runs.icl_data import TEMPTING, write_dataset

    root = tmp_path_factory.mktemp("icl")
    data = write_dataset(root / "data", TEMPTING)
    config = RunConfig(
        dataset=f"native:{data}",
        models=("tests.runs.icl_data:make_mean",),
        out=root / "run",
        icl_k=(0, 1, 2),
        protocols=("native@1",),
    )
    run(config, progress=False).close()
    return root / "run"


@pytest.fixture(scope="session")
def evaluated_training(tiny_ip2p, tmp_path_factory):
    """``medibench train`` of the tiny InstructPix2Pix (full, 3 steps, 32 px) evaluated at every
    step on one held-out sample (``--eval-every 1 --eval-limit 1``, 2 denoising steps): the base
    model at step 0, then checkpoints 1, 2 and 3. Returns ``(folder, the command's output)``;
    read-only."""
    pytest.importorskip("accelerate")
    from typer.testing import CliRunner

    from medibench.cli import app
    from tests.train.conftest import make_triplets, train_args

    root = tmp_path_factory.mktemp("training")
    triplets = make_triplets(root / "train")
    held_out = make_triplets(root / "eval", n=2, prefix="e")
    options = {"max_steps": 3, "eval_every": 1, "eval_limit": 1}
    args = train_args(triplets, tiny_ip2p, root / "run", eval_dataset=f"native:{held_out}",
                      **options)  # fmt: skip
    args += ["--eval-model-option", "steps=2", "--eval-model-option", "resolution=null"]
    result = CliRunner().invoke(app, list(map(str, args)))
    assert result.exit_code == 0, result.output
    return root / "run", result.output


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    from tests import _ray_lock

    _ray_lock.CURRENT[0] = item


def pytest_collection_modifyitems(items):
    """The slow tests first, the longest of them (``slow(seconds=...)``, measured) before the rest
    (a stable sort, the same on every xdist worker): ``--dist loadgroup`` hands the tests out one
    at a time in this order (a group, tests/_ray_lock.py's, first), the longest to whichever
    worker is free, while the rest of the suite fills the gaps, so no long test starts last."""

    def order(item: pytest.Item) -> tuple[bool, float]:
        slow = item.get_closest_marker("slow")
        return slow is None, -(slow.kwargs.get("seconds", 0) if slow else 0)

    items.sort(key=order)
