"""Where the paid APIs are: an explicit base URL, else the environment variable the provider's
official SDK reads for it, else the provider's public endpoint.

So a documented command runs unchanged against any compatible server (a proxy, a gateway, vLLM,
a local fake): ``OPENAI_BASE_URL`` as the ``openai`` SDK reads it (``OpenAI(base_url=None)``),
``GOOGLE_GEMINI_BASE_URL`` as the ``google-genai`` SDK reads it (``google/genai/_base_url.py``:
``HttpOptions.base_url``, else that variable). An explicit URL (a ``base_url`` option, a judge
config's ``base_url``, ``--base-url``) always wins; a variable set to blanks counts as unset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = [
    "GEMINI_API_URL",
    "GEMINI_BASE_URL_ENV",
    "OPENAI_API_URL",
    "OPENAI_BASE_URL_ENV",
    "gemini_base_url",
    "openai_base_url",
]

#: The variable holding the default base URL of every OpenAI-compatible call.
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"
#: The OpenAI API, when neither an explicit URL nor the variable is given.
OPENAI_API_URL = "https://api.openai.com/v1"
#: The variable holding the default base URL (the API root, before ``/v1beta``) of Gemini calls.
GEMINI_BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"
#: The Gemini API's root.
GEMINI_API_URL = "https://generativelanguage.googleapis.com"


def openai_base_url(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """``explicit``, else ``$OPENAI_BASE_URL``, else the OpenAI API; no trailing slash.
    ``environ`` defaults to ``os.environ``."""
    return _base_url(explicit, OPENAI_BASE_URL_ENV, OPENAI_API_URL, environ)


def gemini_base_url(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """``explicit``, else ``$GOOGLE_GEMINI_BASE_URL``, else the Gemini API; no trailing slash."""
    return _base_url(explicit, GEMINI_BASE_URL_ENV, GEMINI_API_URL, environ)


def _base_url(
    explicit: str | None, variable: str, default: str, environ: Mapping[str, str] | None
) -> str:
    if explicit is not None and str(explicit).strip():
        return str(explicit).strip().rstrip("/")
    env = os.environ if environ is None else environ
    return (env.get(variable, "").strip() or default).rstrip("/")
