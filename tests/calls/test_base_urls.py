"""Base URLs from the environment, as the official SDKs read them: ``OPENAI_BASE_URL`` for every
OpenAI-compatible call, ``GOOGLE_GEMINI_BASE_URL`` for Gemini; an explicit URL beats either, and
a run records the URL its calls went to."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.calls import ChatConfig, gemini_base_url, openai_base_url
from medibench.cli import app
from medibench.judges import load_judge_config
from medibench.models._spec import parse_model_spec
from medibench.models.api import GeminiImageModel, OpenAIImageModel
from medibench.models.vlm import OpenAIChatVLM
from medibench.runs import RunStore
from medibench.runs._models import check_model_specs, resolved_spec
from tests.judges._server import FakeJudgeServer, Reply
from tests.judges.conftest import build_run
from tests.models.fake_image_api import FakeImageAPI
from tests.runs.conftest import make_native

FAST = dict(backoff=0.01, max_backoff=0.05, timeout=5.0)
runner = CliRunner()


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-base-url-0123456789")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test-base-url")


def _image():
    return np.random.default_rng(1).integers(0, 256, (16, 20, 3), dtype=np.uint8)


def test_explicit_beats_the_environment_which_beats_the_providers_api():
    env = {"OPENAI_BASE_URL": "http://proxy:9/v1/", "GOOGLE_GEMINI_BASE_URL": "http://g:8/"}
    assert openai_base_url(None, env) == "http://proxy:9/v1"
    assert openai_base_url("http://mine/v1", env) == "http://mine/v1"
    assert openai_base_url(None, {}) == "https://api.openai.com/v1"
    assert openai_base_url(None, {"OPENAI_BASE_URL": "  "}) == "https://api.openai.com/v1"
    assert gemini_base_url(None, env) == "http://g:8"
    assert gemini_base_url("http://other", env) == "http://other"
    assert gemini_base_url(None, {}) == "https://generativelanguage.googleapis.com"


def test_the_chat_config_and_the_judge_config_read_openai_base_url(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert ChatConfig(model="m").endpoint == "http://127.0.0.1:1/v1"
    assert load_judge_config(model="m").endpoint == "http://127.0.0.1:1/v1"
    assert load_judge_config(model="m", base_url="http://x/v1").endpoint == "http://x/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert ChatConfig(model="m").endpoint == "https://api.openai.com/v1"


def test_openai_image_edits_go_to_openai_base_url_unless_one_is_given(keys, monkeypatch):
    with FakeImageAPI() as env_api, FakeImageAPI() as given_api:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{env_api.url}/v1")
        image = _image()
        assert np.array_equal(OpenAIImageModel(**FAST).edit(image, "x", seed=0), 255 - image)
        assert [r["path"] for r in env_api.requests] == ["/v1/images/edits"]
        OpenAIImageModel(base_url=f"{given_api.url}/v1", **FAST).edit(image, "x", seed=0)
        assert len(env_api.requests) == 1 and len(given_api.requests) == 1


def test_gemini_image_goes_to_google_gemini_base_url_unless_one_is_given(keys, monkeypatch):
    with FakeImageAPI() as env_api, FakeImageAPI() as given_api:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", env_api.url)
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")  # not Gemini's
        image = _image()
        out = GeminiImageModel("gemini-x", **FAST).edit(image, "x", seed=3)
        assert np.array_equal(out, 255 - image)
        assert [r["path"] for r in env_api.requests] == ["/v1beta/models/gemini-x:generateContent"]
        GeminiImageModel("gemini-x", base_url=given_api.url, **FAST).edit(image, "x", seed=3)
        assert len(env_api.requests) == 1 and len(given_api.requests) == 1


def test_openai_chat_answers_from_openai_base_url_unless_one_is_given(keys, monkeypatch):
    with (
        FakeJudgeServer(lambda body, n: Reply("from the environment")) as env_srv,
        FakeJudgeServer(lambda body, n: Reply("from the option")) as given_srv,
    ):
        monkeypatch.setenv("OPENAI_BASE_URL", env_srv.base_url)
        vlm = OpenAIChatVLM("vlm-x")
        assert vlm.answer([_image()], "What is shown?", seed=0) == "from the environment"
        given = OpenAIChatVLM("vlm-x", base_url=given_srv.base_url)
        assert given.answer([_image()], "What is shown?", seed=0) == "from the option"
        vlm.close()
        given.close()
        assert (env_srv.count, given_srv.count) == (1, 1)


def test_a_run_records_the_base_url_its_calls_went_to(keys, monkeypatch, tmp_path):
    data = make_native(tmp_path / "data", n=2)
    with FakeImageAPI() as api:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{api.url}/v1")
        argv = ["run", "--dataset", f"native:{data}", "--model", "openai-image:gpt-image-1"]
        res = runner.invoke(app, [*argv, "--out", str(tmp_path / "run"), "--no-progress"])
        assert res.exit_code == 0, res.output
        assert len(api.requests) == 2
    with RunStore.open_existing(tmp_path / "run") as store:
        recorded = store.get_meta("model_specs_by_name")["gpt-image-1"]
    assert recorded["options"]["base_url"] == f"{api.url}/v1"
    assert resolved_spec(parse_model_spec("openai-chat:m"))["options"]["base_url"] == (
        f"{api.url}/v1"
    )


def test_another_server_under_the_same_model_name_is_refused_and_old_records_still_match(
    monkeypatch, tmp_path
):
    spec = parse_model_spec("openai-chat:m")
    with RunStore(tmp_path / "run") as store:
        # a run recorded before base URLs were resolved: None stood for the OpenAI API
        old = resolved_spec(spec)
        old["options"]["base_url"] = None
        store.set_meta("model_specs_by_name", {"m": old})
        check_model_specs(store, {"m": resolved_spec(spec)})
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
        with pytest.raises(Exception, match="holds model 'm' made with spec"):
            check_model_specs(store, {"m": resolved_spec(spec)})


def test_the_judge_records_the_endpoint_from_openai_base_url(keys, monkeypatch, tmp_path):
    run = build_run(tmp_path / "run", ["a", "b"])
    with FakeJudgeServer() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        res = runner.invoke(app, ["judge", str(run), "--judge-model", "judge-x"])
        assert res.exit_code == 0, res.output
        assert srv.count == 2 and srv.requests[0]["path"] == "/v1/chat/completions"
    with sqlite3.connect(run / "run.sqlite") as db:
        endpoints = {e for (e,) in db.execute("SELECT endpoint FROM judgements")}
        scores = [json.loads(s) for (s,) in db.execute("SELECT scores FROM judgements")]
    assert endpoints == {srv.base_url}
    assert scores[0] == {
        "editing_accuracy": 7.0,
        "contextual_preservation": 8.0,
        "visual_quality": 6.0,
    }
