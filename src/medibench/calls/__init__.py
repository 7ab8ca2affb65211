"""Every remote call's shared machinery: keys, secret redaction, retries.

* :func:`key_from_env` / :class:`MissingAPIKeyError`: API keys come from the environment only,
  and each one read is registered as a secret.
* :func:`redact` / :func:`redact_value` / :class:`RedactingFilter`: the one redaction layer;
  every HTTP client passes what it stores, logs or reports through it, and
  :func:`install_redaction` / :func:`get_logger` put it on loggers and handlers.
* :class:`RetryPolicy` / :func:`send`: one jittered exponential retry honouring ``Retry-After``,
  used by the chat client and the image-editing API models.
* :class:`ChatClient` / :class:`ChatConfig`: the one OpenAI-compatible chat client (judges,
  answering VLMs and the edit judge all use it); :func:`png_data_url` / :func:`file_data_url`
  put images into its messages.
* :class:`CallSlots` / :func:`run_bounded` / :class:`CostBudget`: bounded concurrency (a client
  and a semaphore per event loop, workers over a shared queue) and a run folder's cost budget.
* :func:`openai_base_url` / :func:`gemini_base_url`: the base URL of a call: an explicit one,
  else ``$OPENAI_BASE_URL`` / ``$GOOGLE_GEMINI_BASE_URL`` (as the official SDKs read them),
  else the provider's public endpoint.
* :class:`Ahead`: request bodies or inputs made on a thread ahead of need.
* :func:`preload_http`: import the HTTP stack on a thread while the caller plans.
* :func:`json_body`: a JSON request body with its data URLs spliced in, not escaped;
  :func:`data_url` makes them (:class:`PlainText`, spliced without a scan) and
  :func:`b64_text` their base64 (pybase64: SIMD, and it lets go of the GIL).

Importing it installs :class:`RedactingFilter` on medibench's loggers and its HTTP stack's
(:data:`LOGGERS`, :func:`install_redaction`), so no log line can carry a key. This package
imports no HTTP library until :func:`send` runs (or :func:`preload_http` is called).
"""

from medibench.calls import _endpoints
from medibench.calls._ahead import Ahead
from medibench.calls._base64 import b64_text
from medibench.calls._body import PlainText, data_url, json_body
from medibench.calls._endpoints import *  # noqa: F403 (its __all__, exported again below)
from medibench.calls._keys import MissingAPIKeyError, key_from_env
from medibench.calls._limits import CallSlots, CostBudget, preload_http, run_bounded
from medibench.calls._redact import (
    LOGGERS,
    REDACTED,
    RedactingFilter,
    get_logger,
    install_redaction,
    redact,
    redact_value,
    register_secret,
)
from medibench.calls._retry import (
    RETRY_STATUS,
    Reply,
    RetryPolicy,
    body_excerpt,
    is_transient,
    parse_retry_after,
    send,
)
from medibench.registry import lazy_attributes

#: Exported names whose modules import pydantic or OpenCV: loaded on first use, so importing
#: the call layer (every model's error classes do) stays cheap.
_LAZY = {
    "ChatClient": "._chat", "ChatConfig": "._chat", "ChatSetupError": "._chat",
    "Completion": "._chat", "ImageTooLargeError": "._images", "file_data_url": "._images",
    "png_data_url": "._images",
}  # fmt: skip

__all__ = [
    "Ahead",
    *_LAZY,
    "PlainText",
    "b64_text",
    "data_url",
    *_endpoints.__all__,
    "LOGGERS",
    "REDACTED",
    "CallSlots",
    "CostBudget",
    "RETRY_STATUS",
    "MissingAPIKeyError",
    "RedactingFilter",
    "Reply",
    "RetryPolicy",
    "body_excerpt",
    "get_logger",
    "install_redaction",
    "is_transient",
    "json_body",
    "key_from_env",
    "parse_retry_after",
    "preload_http",
    "redact",
    "redact_value",
    "register_secret",
    "run_bounded",
    "send",
]

install_redaction()

__getattr__ = lazy_attributes(__name__, _LAZY)
