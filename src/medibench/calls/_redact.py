"""Secret redaction: the one place that removes API keys from text medibench stores or shows.

Two kinds of secret are removed:

* the **values of the keys in use**: every key read through :func:`medibench.calls.key_from_env`
  (or registered with :func:`register_secret`), and the values of environment variables whose
  names say they hold one (``*API_KEY*``, ``*_TOKEN``, ``*SECRET*``);
* anything **shaped like a key**: ``Bearer <token>``, ``sk-...`` keys, Google ``AIza...`` keys,
  and the value after ``api_key=`` / ``"authorization": ...``.

Every HTTP client (the judges' and the image-editing models') passes the error messages, answer
bodies and raw answers it hands on through :func:`redact`, so no stored error, raw answer, log
line, export or report holds a key.

Example:
    >>> register_secret("zz-medibench-example-42")
    >>> redact("server said: key zz-medibench-example-42 is bad; Authorization: Bearer abcdefgh12")
    'server said: key [REDACTED] is bad; Authorization: Bearer [REDACTED]'
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any, overload
from urllib.parse import quote

__all__ = [
    "LOGGERS",
    "REDACTED",
    "RedactingFilter",
    "get_logger",
    "install_redaction",
    "redact",
    "redact_value",
    "register_secret",
]

#: What a secret is replaced with.
REDACTED = "[REDACTED]"
#: Shorter values are not treated as secrets (they would redact ordinary words).
_MIN_CHARS = 6
_SECRET_ENV = re.compile(r"API_?KEY|_TOKEN$|^TOKEN$|SECRET|PASSWORD", re.IGNORECASE)
_PLACEHOLDERS = {"EMPTY", "none", "None", "null", "dummy"}

_known: set[str] = set()
_lock = threading.Lock()

# (pattern, replacement): key-shaped text, whoever's key it is.
_SHAPES = (
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=\-]{8,}"), r"\1 " + REDACTED),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"), REDACTED),
    (
        re.compile(
            r"(?i)((?:api[_\-]?key|x-goog-api-key|x-api-key|authorization|access[_\-]?token)"
            r"[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED\])(?!bearer\s)[^\s\"',;}&]{6,}"
        ),
        r"\1" + REDACTED,
    ),
)


def register_secret(value: str | None) -> None:
    """Treat ``value`` (a key just read) as a secret from now on, in this process."""
    if value and len(value) >= _MIN_CHARS and value not in _PLACEHOLDERS:
        with _lock:
            _known.add(value)


def _secrets() -> list[str]:
    env = [
        v
        for k, v in os.environ.items()
        if _SECRET_ENV.search(k) and len(v) >= _MIN_CHARS and v not in _PLACEHOLDERS
    ]
    with _lock:
        values = set(_known) | set(env)
    values |= {quote(v, safe="") for v in values}  # as it appears in a URL or a form
    return sorted(values, key=len, reverse=True)  # longest first: no partial leftovers


@overload
def redact(text: str) -> str: ...
@overload
def redact(text: None) -> None: ...
@overload
def redact(text: str | None) -> str | None: ...
def redact(text: str | None) -> str | None:
    """``text`` with every secret value and key-shaped string replaced by ``[REDACTED]``."""
    if not text:
        return text
    for value in _secrets():
        if value in text:
            text = text.replace(value, REDACTED)
    for pattern, repl in _SHAPES:
        text = pattern.sub(repl, text)
    return text


def redact_value(obj: Any) -> Any:
    """:func:`redact` applied to every string inside ``obj`` (dicts, lists, tuples)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_value(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(redact_value(v) for v in obj)
    return obj


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message and exception text."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


#: The loggers whose records may carry a request or a key: medibench's own and its HTTP stack's.
LOGGERS = (
    "medibench",
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "openai",
    "urllib3",
)


def install_redaction(*targets: logging.Logger | logging.Handler | str) -> None:
    """Put a :class:`RedactingFilter` on each logger (by name or object) and its handlers, and
    on each handler given (once each). Without targets: :data:`LOGGERS`.

    A logger's filter sees the records logged on it; a handler's sees every record it emits, so
    a handler added to ``medibench`` (the CLI's, a user's) gets one too.
    """
    for target in targets or LOGGERS:
        obj = logging.getLogger(target) if isinstance(target, str) else target
        items: list[logging.Logger | logging.Handler] = [obj]
        if isinstance(obj, logging.Logger):
            items += obj.handlers
        for item in items:
            if not any(isinstance(f, RedactingFilter) for f in item.filters):
                item.addFilter(RedactingFilter())


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with redaction installed (medibench's modules log through
    this, so no record of theirs can carry a key)."""
    logger = logging.getLogger(name)
    install_redaction(logger)
    return logger
