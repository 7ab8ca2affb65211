"""Shared test settings: one thread everywhere, no network."""

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

import cv2  # noqa: E402

cv2.setNumThreads(1)


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


def pytest_collection_modifyitems(items):
    """The slow tests first (a stable sort, the same on every xdist worker): the scheduler hands
    them out while the rest of the suite fills the gaps, so no long test starts last."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
