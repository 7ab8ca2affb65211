"""Request bodies: JSON with large plain strings (data URLs) spliced in as bytes.

:func:`json_body` returns exactly the bytes of
``json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")``, but does not run
the JSON string escaper over long strings that need no escaping (base64 data URLs of images: a
judge request carries several hundred kilobytes of them): those are encoded to bytes once and
joined into the skeleton's JSON. The escaper costs about 3 ns per character; a judge call with
three 256x256 PNGs spent 2.5 ms of its client CPU in it (bench/judge.py).

Whether a long string needs escaping is a scan of it (90-140 us per 263 KB data URL, 0.27 ms
of a three-image judge request) unless it is a :class:`PlainText`: the data URLs that
:func:`data_url` makes are printable ASCII without quotes or backslashes by construction, and
are spliced without the scan.
"""

from __future__ import annotations

import json
from typing import Any

from medibench.calls._base64 import b64_text

__all__ = ["PlainText", "data_url", "json_body"]

#: Strings at least this long are candidates for splicing (shorter ones are cheap to escape).
SPLICE_CHARS = 4096
# What a spliced string is replaced with in the skeleton: json.dumps writes it as this marker.
_PLACEHOLDER = "\x00\x00"
_MARKER = json.dumps(_PLACEHOLDER)
# Printable ASCII but the two characters JSON escapes: such a string is its own JSON body.
_PLAIN = bytes(range(0x20, 0x7F)).replace(b'"', b"").replace(b"\\", b"")


class PlainText(str):
    """A string that JSON writes as it is (printable ASCII, no ``"`` or ``\\``), by how it was
    made: :func:`json_body` splices a long one without scanning it. Make it with
    :func:`data_url` rather than directly."""

    __slots__ = ()


def data_url(mime: str, data: bytes) -> PlainText:
    """``data:{mime};base64,...`` of ``data``, as :class:`PlainText`.

    Raises:
        ValueError: ``mime`` is not a short printable ASCII type (``image/png``).
    """
    if not (0 < len(mime) <= 255 and mime.isascii() and mime.isprintable()) or any(
        c in mime for c in '"\\,;'
    ):
        raise ValueError(f"not a MIME type for a data URL: {mime!r}")
    return PlainText(f"data:{mime};base64," + b64_text(data))


def json_body(obj: Any) -> bytes:
    """``obj`` as compact ASCII JSON bytes (what ``json.dumps(obj, ensure_ascii=True,
    separators=(",", ":"))`` encodes), long plain strings spliced in instead of escaped."""
    spliced: list[bytes] = []
    skeleton = _swap(obj, spliced)
    text = json.dumps(skeleton, ensure_ascii=True, separators=(",", ":"))
    if not spliced:
        return text.encode("ascii")
    parts = text.split(_MARKER)
    if len(parts) != len(spliced) + 1:  # the placeholder also stood in the data: no splicing
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    out = [parts[0].encode("ascii")]
    for raw, part in zip(spliced, parts[1:], strict=True):
        out += [b'"', raw, b'"', part.encode("ascii")]
    return b"".join(out)


def _swap(obj: Any, spliced: list[bytes]) -> Any:
    """``obj`` with each long plain string replaced by the placeholder (its bytes appended to
    ``spliced`` in the order ``json.dumps`` writes them: dict insertion order, list order)."""
    if type(obj) is PlainText:
        if len(obj) >= SPLICE_CHARS:
            spliced.append(obj.encode("ascii"))
            return _PLACEHOLDER
        return obj
    if isinstance(obj, str):
        if len(obj) >= SPLICE_CHARS and obj.isascii():
            raw = obj.encode("ascii")
            if not raw.translate(None, _PLAIN):  # nothing JSON would escape
                spliced.append(raw)
                return _PLACEHOLDER
        return obj
    if isinstance(obj, dict):
        return {k: _swap(v, spliced) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_swap(v, spliced) for v in obj]
    return obj
