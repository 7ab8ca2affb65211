"""json_body: the bytes of json.dumps, with long plain strings spliced in unescaped."""

from __future__ import annotations

import base64
import json
import os

import pytest

from medibench.calls import PlainText, data_url, json_body
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


def test_data_urls_are_spliced_unscanned_and_still_byte_for_byte_json_dumps():
    png = os.urandom(30000)
    url = data_url("image/png", png)
    assert isinstance(url, PlainText)
    assert url == "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    obj = {"content": [{"image_url": {"url": url}}, {"text": "x"}, {"url": data_url("a/b", b"")}]}
    assert json_body(obj) == _dumps(obj)
    # Unscanned: PlainText is trusted as made. One made by hand against its contract (a quote
    # inside) goes in as it is, where a plain str of the same text is escaped.
    forged = "q" * SPLICE_CHARS + '"'
    assert json_body([PlainText(forged)]) == b'["' + forged.encode() + b'"]'
    assert json_body([forged]) == _dumps([forged])


@pytest.mark.parametrize("mime", ["", 'image/"png', "image/png;x", "image/png,", "imäge", "a\nb"])
def test_a_data_url_refuses_a_mime_type_that_would_need_escaping(mime):
    with pytest.raises(ValueError, match="not a MIME type for a data URL"):
        data_url(mime, b"x")
