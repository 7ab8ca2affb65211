"""Fixtures of the source tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def retry_waits(monkeypatch):
    """huggingface_hub retries a 5xx with waits of 1-8 s and resumes a cut-off body after 1 s:
    the same tries without the waits. Returns the list of the waits it asked for, in seconds."""
    import time
    import types

    from huggingface_hub import file_download
    from huggingface_hub.utils import _http

    waits: list[float] = []
    clock = {k: getattr(time, k) for k in dir(time) if not k.startswith("_")}
    fake = types.SimpleNamespace(**{**clock, "sleep": waits.append})
    for module in (_http, file_download):
        monkeypatch.setattr(module, "time", fake)
    return waits


@pytest.fixture
def hub_env(tmp_path, monkeypatch, retry_waits):
    """The hub client pointed at a temporary cache, online, with no token of the user's, and
    its retries not waiting (``retry_waits``)."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf_home" / "hub"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf_home" / "token"))
    return monkeypatch
