import pytest

from tests.report.helpers import make_run


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A scored run (9 samples, identity and classical, native@1); do not modify it."""
    return make_run(tmp_path_factory.mktemp("report") / "run")
