import asyncio
import random

import pytest

from medibench.judges import JudgeClient, JudgeConfig, JudgeSetupError, MissingApiKeyError
from tests.judges._server import FakeJudgeServer, Reply

MSG = [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]


def _config(server, **kw):
    return JudgeConfig(
        model="judge-x", base_url=server.base_url, backoff_s=0.01, backoff_max_s=0.05, **kw
    )


def _complete(config, **kw):
    async def go():
        client = JudgeClient(config, rng=random.Random(0))
        try:
            return await client.complete(MSG, seed=3, **kw), client.calls
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_request_shape_and_key_header(api_key):
    with FakeJudgeServer() as srv:
        done, calls = _complete(_config(srv), response_format={"type": "json_object"})
        body = srv.requests[0]
    assert calls == 1 and done.error is None and done.text.startswith("Editing Accuracy")
    assert (done.input_tokens, done.output_tokens, done.finish_reason) == (1000, 100, "stop")
    assert body["path"] == "/v1/chat/completions" and body["model"] == "judge-x"
    assert body["temperature"] == 0.0 and body["seed"] == 3 and body["max_tokens"] == 1024
    assert body["response_format"] == {"type": "json_object"}
    assert body["auth"] == f"Bearer {api_key}"


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_errors_are_retried(api_key, status):
    with FakeJudgeServer(lambda b, n: Reply(status=status) if n < 3 else Reply()) as srv:
        done, calls = _complete(_config(srv))
    assert done.error is None and done.attempts == 3 and srv.count == 3 == calls


def test_retries_are_bounded(api_key):
    with FakeJudgeServer(lambda b, n: Reply(status=429, headers={"Retry-After": "0"})) as srv:
        done, _ = _complete(_config(srv, max_attempts=3))
    assert srv.count == 3
    assert done.text is None and "HTTP 429" in done.error and "after 3 attempt" in done.error


def test_slow_reply_times_out_then_retries(api_key):
    with FakeJudgeServer(lambda b, n: Reply(delay=1.0) if n == 1 else Reply()) as srv:
        done, _ = _complete(_config(srv, timeout_s=0.2))
    assert done.error is None and done.attempts == 2


def test_bad_request_is_not_retried(api_key):
    with FakeJudgeServer(lambda b, n: Reply(status=400)) as srv:
        done, _ = _complete(_config(srv))
    assert srv.count == 1 and "HTTP 400" in done.error


def test_refusal_field_and_content_filter(api_key):
    with FakeJudgeServer(lambda b, n: Reply(content=None, refusal="I can't review this")) as srv:
        done, _ = _complete(_config(srv))
    assert done.refused == "I can't review this"
    with FakeJudgeServer(lambda b, n: Reply(content="", finish_reason="content_filter")) as srv:
        done, _ = _complete(_config(srv))
    assert done.refused == "content_filter"


def test_rejected_key_stops_with_a_setup_error(api_key):
    with FakeJudgeServer(lambda b, n: Reply(status=401)) as srv:
        with pytest.raises(JudgeSetupError, match="HTTP 401"):
            _complete(_config(srv))
        assert srv.count == 1


def test_connection_refused_is_an_error_not_a_crash(api_key):
    with FakeJudgeServer() as srv:
        url = srv.base_url
    done, _ = _complete(JudgeConfig(model="m", base_url=url, max_attempts=2, backoff_s=0.01))
    assert "connection error" in done.error


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("MY_JUDGE_KEY", raising=False)
    cfg = JudgeConfig(model="m", api_key_env="MY_JUDGE_KEY")
    with pytest.raises(MissingApiKeyError, match="MY_JUDGE_KEY"):
        JudgeClient(cfg)
    assert (
        JudgeConfig(model="m", api_key_env="MY_JUDGE_KEY", api_key_required=False).api_key()
        == "EMPTY"
    )


@pytest.mark.parametrize(
    "reply,kind,said",
    [
        (
            Reply(raw="<html><body>502 upstream</body></html>", content_type="text/html"),
            "HTTP 200, body not JSON",
            "an HTML page",
        ),
        (
            Reply(raw='{"id": "x", "choices": [{"index": 0, "message": {"role": "assis'),
            "HTTP 200, body not JSON",
            "not valid JSON",
        ),
        (
            Reply(raw='{"result": "Editing Accuracy: 7/10"}'),
            "HTTP 200, no choices[0].message",
            "no choices[0].message",
        ),
        (Reply(raw='["not", "an", "object"]'), "HTTP 200, no choices[0].message", "no choices"),
        (Reply(raw='{"choices": []}'), "HTTP 200, no choices[0].message", "no choices"),
        (Reply(status=418, message="teapot"), "HTTP 418", "teapot"),
    ],
)
def test_a_bad_reply_is_one_failed_call_naming_endpoint_status_and_body(api_key, reply, kind, said):
    with FakeJudgeServer(lambda b, n: reply) as srv:
        done, calls = _complete(_config(srv))
    assert calls == 1 and done.text is None and done.failure == kind
    assert done.error.startswith(f"{srv.base_url}: HTTP ") and said in done.error
    body = reply.raw if reply.raw is not None else "teapot"
    assert body[:40] in done.error  # the first characters of the body


def test_long_bodies_are_cut_at_200_characters(api_key):
    page = "<html>" + "x" * 500 + "</html>"
    with FakeJudgeServer(lambda b, n: Reply(raw=page, content_type="text/html")) as srv:
        done, _ = _complete(_config(srv))
    shown = done.error.split(": ", 3)[-1]
    assert shown == page[:200] + "..."


def test_an_echoed_key_is_redacted_from_errors_and_answers(monkeypatch):
    key = "zz-judge-key-7f3a9c2e51"  # not shaped like a key: removed because it is in use
    monkeypatch.setenv("MY_JUDGE_KEY", key)
    with FakeJudgeServer(lambda b, n: Reply(status=400, message="bad auth header {auth}")) as srv:
        done, _ = _complete(_config(srv, api_key_env="MY_JUDGE_KEY"))
    assert "HTTP 400" in done.error and key not in done.error and "[REDACTED]" in done.error
    with FakeJudgeServer(lambda b, n: Reply(status=401, message="rejected {auth}")) as srv:
        with pytest.raises(JudgeSetupError) as info:
            _complete(_config(srv, api_key_env="MY_JUDGE_KEY"))
    assert key not in str(info.value) and "HTTP 401" in str(info.value)
    with FakeJudgeServer(lambda b, n: Reply(raw="<p>debug: {auth}</p>")) as srv:
        done, _ = _complete(_config(srv, api_key_env="MY_JUDGE_KEY"))
    assert key not in done.error and "Bearer [REDACTED]" in done.error
