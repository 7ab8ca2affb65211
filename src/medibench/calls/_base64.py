"""Base64 text for request bodies, through pybase64.

The output is byte for byte what the standard library's ``base64.b64encode`` gives: the standard
alphabet, with padding. pybase64 is libbase64's SIMD codec, and it lets go of the GIL. A
256x256 RGB noise PNG (197 KB) takes 5 us against 330-440 us in the standard library's
``binascii``, which holds the GIL throughout. A judge request of three such images spent
1.0-1.3 ms of its client's GIL time there, with the event loop's replies waiting behind it
(bench/judge.py).

Decoding (an API model's answer) stays with the standard library's ``b64decode(...,
validate=True)``: pybase64's strict decode also refuses excess padding, which the standard one
accepts, and one decode per edited image is not where the time goes.
"""

from __future__ import annotations

import pybase64

__all__ = ["b64_text"]


def b64_text(data: bytes) -> str:
    """``data`` as standard base64 text with padding (``base64.b64encode(data)``'s)."""
    # As a string at once: encoding to bytes, then decoding those to a str, made two 263 KB
    # objects per 197 KB PNG, and their fresh pages cost 200 us here against 5 us for this.
    return pybase64.b64encode_as_string(data)
