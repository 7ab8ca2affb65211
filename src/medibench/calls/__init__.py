"""Every remote call's shared machinery: keys, secret redaction, retries.

* :func:`key_from_env` / :class:`MissingAPIKeyError`: API keys come from the environment only,
  and each one read is registered as a secret.
* :func:`redact` / :func:`redact_value` / :class:`RedactingFilter`: the one redaction layer;
  every HTTP client passes what it stores, logs or reports through it.
* :class:`RetryPolicy` / :func:`send`: one jittered exponential retry honouring ``Retry-After``,
  used by the judges' client and the image-editing API models.

This package imports no HTTP library until :func:`send` runs.
"""

from medibench.calls._keys import MissingAPIKeyError, key_from_env
from medibench.calls._redact import (
    REDACTED,
    RedactingFilter,
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

__all__ = [
    "REDACTED",
    "RETRY_STATUS",
    "MissingAPIKeyError",
    "RedactingFilter",
    "Reply",
    "RetryPolicy",
    "body_excerpt",
    "is_transient",
    "key_from_env",
    "parse_retry_after",
    "redact",
    "redact_value",
    "register_secret",
    "send",
]
