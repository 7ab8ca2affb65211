"""json_body: the bytes of json.dumps, with long plain strings spliced in unescaped."""

from __future__ import annotations

import base64
import json
import os

import pytest

from medibench.calls import json_body
from medibench.calls._body import SPLICE_CHARS


def _dumps(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _url(n: int) -> str:
    return "data:image/png;base64," + base64.b64encode(os.urandom(n)).decode("ascii")


@pytest.mark.parametrize(
    "obj",
    [
        # a judge request: text parts, three data URLs, decoding parameters
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": 'You are a judge. «Accents» and "quotes"\n'},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Input:"},
                        {"type": "image_url", "image_url": {"url": _url(30000)}},
                        {"type": "image_url", "image_url": {"url": _url(20000)}},
                        {"type": "text", "text": "x" * (SPLICE_CHARS + 5)},  # long, plain
                        {"type": "image_url", "image_url": {"url": _url(9000)}},
                    ],
                },
            ],
            "temperature": 0.0,
            "seed": 7,
            "max_tokens": None,
            "top_p": 1e-300,
        },
        # long strings that must be escaped stay with json.dumps: quotes, backslashes,
        # control characters, non-ASCII
        {"a": 'q"' * SPLICE_CHARS, "b": "\\" * SPLICE_CHARS, "c": "\x01" + "x" * SPLICE_CHARS},
        {"d": "é" * SPLICE_CHARS, "e": ("t", _url(SPLICE_CHARS)), 1: [True, None]},
        # the placeholder itself in the data: spliced strings cannot be told apart
        {"p": "\x00\x00", "u": _url(SPLICE_CHARS)},
        "plain" * SPLICE_CHARS,  # a bare long string
        [],
    ],
)
def test_json_body_is_byte_for_byte_json_dumps(obj):
    assert json_body(obj) == _dumps(obj)


def test_json_body_parses_back_to_the_data_url():
    url = _url(50000)
    body = json_body({"image_url": {"url": url}, "n": 2})
    assert json.loads(body) == {"image_url": {"url": url}, "n": 2}
