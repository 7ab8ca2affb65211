"""The run's cost budget (``max_cost``) charged by the API models through the call layer."""

from __future__ import annotations

import pytest
from rich.console import Console

from medibench.runs import RunConfig, RunError, run
from tests.models.fake_image_api import FakeImageAPI
from tests.runs.conftest import make_native

QUIET = Console(stderr=True, quiet=True)


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeImageAPI() as server:
        yield server


def _config(api, data, out, max_cost, price="0.1", executor="local"):
    options = [f"base_url={api.url}/v1", "backoff=0.01"]
    if price is not None:
        options.append(f"price_per_image={price}")
    return RunConfig(
        dataset=f"native:{data}",
        models=["openai-image:gpt-image-1"],
        out=out,
        stage="generate",
        model_options=options,
        max_cost=max_cost,
        executor=executor,
    )


def test_the_budget_stops_paid_calls_and_a_larger_one_resumes(api, tmp_path):
    data = make_native(tmp_path / "data", n=3)
    out = tmp_path / "run"
    with run(_config(api, data, out, 0.25), progress=False, console=QUIET) as store:
        preds = store.predictions()
    assert len(api.requests) == 2  # 0.1 + 0.1 <= 0.25; a third would not be
    assert len(preds) == 2 and {p.status for p in preds} == {"ok"}  # no row for the third
    # The 0.2 USD already spent in this folder counts: 0.35 leaves room for exactly one more.
    with run(_config(api, data, out, 0.35), progress=False, console=QUIET) as store:
        assert len(store.predictions()) == 3
    assert len(api.requests) == 3
    with run(_config(api, data, out, 0.0), progress=False, console=QUIET) as store:
        assert len(store.predictions()) == 3  # all done: nothing asked, nothing refused
    assert len(api.requests) == 3


def test_a_budget_needs_a_price_and_the_local_executor(api, tmp_path):
    data = make_native(tmp_path / "data", n=1)
    with pytest.raises(RunError, match="gpt-image-1.*no price.*price_per_image=USD"):
        run(_config(api, data, tmp_path / "a", 1.0, price=None), progress=False, console=QUIET)
    with pytest.raises(RunError, match="--max-cost needs --executor local"):
        run(_config(api, data, tmp_path / "b", 1.0, executor="ray"), progress=False, console=QUIET)
    assert api.requests == []
    with pytest.raises(ValueError, match="max_cost must be >= 0"):
        _config(api, data, tmp_path / "c", -1.0)


def test_local_models_pay_nothing_under_a_budget(tmp_path):
    data = make_native(tmp_path / "data", n=2)
    config = RunConfig(
        dataset=f"native:{data}", models=["identity"], out=tmp_path / "r", max_cost=0.0
    )
    with run(config, progress=False, console=QUIET) as store:
        assert len(store.predictions()) == 2


def test_the_cli_takes_max_cost_and_says_what_was_not_started(api, tmp_path):
    from typer.testing import CliRunner

    from medibench.cli import app

    data = make_native(tmp_path / "data", n=3)
    args = ["run", "--dataset", f"native:{data}", "--model", "openai-image:gpt-image-1"]
    for option in (f"base_url={api.url}/v1", "backoff=0.01", "price_per_image=0.1"):
        args += ["--model-option", option]
    args += ["--stage", "generate", "--max-cost", "0.15", "--out", str(tmp_path / "run")]
    res = CliRunner().invoke(app, [*args, "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "1 done" in res.output and "2 not started: the cost budget (--max-cost) is spent" in (
        " ".join(res.output.split())
    )
    assert len(api.requests) == 1


def test_a_run_recorded_before_price_per_image_existed_still_resumes(tmp_path):
    from medibench.runs import RunStore
    from medibench.runs._models import check_model_specs, record_model_specs
    from medibench.runs._store import RunStoreError

    old = {"model": "openai-image", "options": {"model": "gpt-image-1", "retries": 5}}
    with RunStore(tmp_path / "run") as store:
        record_model_specs(store, {"gpt-image-1": old})
        now = {**old, "options": {"model": "gpt-image-1", "max_attempts": 6}}
        now["options"]["price_per_image"] = None  # an added option at None: the same
        check_model_specs(store, {"gpt-image-1": now})  # and retries=5 is max_attempts=6
        priced = {**now, "options": {**now["options"], "price_per_image": 0.04}}
        with pytest.raises(RunStoreError, match="holds model 'gpt-image-1' made with spec"):
            check_model_specs(store, {"gpt-image-1": priced})
        changed = {**now, "options": {**now["options"], "max_attempts": 3}}
        with pytest.raises(RunStoreError):
            check_model_specs(store, {"gpt-image-1": changed})
