"""Judge configuration: which model, which endpoint, decoding, retries, prices, image limits.

A config is a small file (YAML when PyYAML is installed, JSON or TOML always) or command-line
options. It never holds the API key itself, only the *name* of the environment variable that
does (``OPENAI_API_KEY`` by default): keys are read from the environment at call time, never
logged and never written to the run store.

Example (``judge.yaml``)::

    model: gpt-4o-2024-08-06
    base_url: https://api.openai.com/v1
    api_key_env: OPENAI_API_KEY
    structured_output: json_schema     # none | json_object | json_schema
    concurrency: 16
    max_attempts: 6
    price_input_per_mtok: 2.5          # USD per million prompt tokens
    price_output_per_mtok: 10.0
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from medibench.calls import MissingAPIKeyError, register_secret

__all__ = ["JudgeConfig", "JudgeConfigError", "MissingApiKeyError", "load_judge_config"]


class JudgeConfigError(ValueError):
    """A judge config file that cannot be read or has a bad field (the message names both)."""


#: The call layer's one missing-key error (the judges' older name for it).
MissingApiKeyError = MissingAPIKeyError


class JudgeConfig(BaseModel):
    """How to reach and drive one judge model.

    Attributes:
        model: the judge model id, as the endpoint names it (part of the cache key).
        base_url: the OpenAI-compatible endpoint, ending in ``/v1`` for most servers (part of
            the cache key). ``None`` means the OpenAI API.
        api_key_env: the environment variable holding the key.
        api_key_required: ``False`` for local servers (vLLM, sglang, Ollama) that take any key;
            then a missing variable sends the placeholder ``"EMPTY"``.
        temperature, seed, max_tokens, top_p: decoding parameters (part of the cache key).
            Pass ``p`` of ``--passes N`` is sent with seed ``seed + p``.
        structured_output: what the server supports: ``"json_schema"`` (strict schema),
            ``"json_object"`` (any JSON) or ``"none"`` (free text, parsed tolerantly).
        concurrency: calls in flight at once.
        max_attempts: attempts per call (1 = no retry) on 429, 5xx, timeouts, connection errors.
        backoff_s, backoff_max_s: exponential backoff ``min(max, backoff_s * 2**attempt)``,
            jittered (a uniform draw in [half of that, that]); a ``Retry-After`` is honoured
            (:class:`medibench.calls.RetryPolicy`, shared with the image-editing API models).
        timeout_s: per-attempt HTTP timeout.
        max_image_side: images with a longer side are resized (``oversize="resize"``, recorded)
            or refused with an error (``oversize="refuse"``).
        price_input_per_mtok, price_output_per_mtok: USD per million tokens, for cost records,
            dry-run estimates and ``--max-cost``. ``None`` = unknown (cost not recorded).
        est_image_tokens, est_output_tokens: dry-run guesses per image and per answer, used
            until the run has judged answers with real usage.
    """

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    api_key_required: bool = True
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int = Field(default=1024, ge=1)
    top_p: float | None = None
    structured_output: Literal["none", "json_object", "json_schema"] = "none"
    concurrency: int = Field(default=8, ge=1)
    max_attempts: int = Field(default=5, ge=1)
    backoff_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=60.0, ge=0)
    timeout_s: float = Field(default=120.0, gt=0)
    max_image_side: int = Field(default=2048, ge=16)
    oversize: Literal["resize", "refuse"] = "resize"
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    est_image_tokens: int = Field(default=800, ge=0)
    est_output_tokens: int = Field(default=400, ge=0)

    def api_key(self) -> str:
        """The key from the environment; :class:`MissingApiKeyError` names the variable."""
        key = os.environ.get(self.api_key_env, "").strip()
        if key:
            register_secret(key)  # redacted from everything stored, logged or reported
            return key
        if not self.api_key_required:
            return "EMPTY"
        raise MissingApiKeyError(
            f"the judge needs an API key in the environment variable {self.api_key_env} "
            f"(export {self.api_key_env}=...; for a local server that takes any key, set "
            "api_key_required: false in the judge config)"
        )

    @property
    def endpoint(self) -> str:
        """The endpoint as it enters the cache key (no trailing slash)."""
        return (self.base_url or "https://api.openai.com/v1").rstrip("/")

    @property
    def has_prices(self) -> bool:
        return self.price_input_per_mtok is not None and self.price_output_per_mtok is not None

    def cost(self, input_tokens: int | None, output_tokens: int | None) -> float | None:
        """USD for one call, or ``None`` when the prices or the usage are unknown."""
        price_in, price_out = self.price_input_per_mtok, self.price_output_per_mtok
        if price_in is None or price_out is None or input_tokens is None or output_tokens is None:
            return None
        return (input_tokens * price_in + output_tokens * price_out) / 1e6

    def decoding(self, seed: int | None) -> dict[str, Any]:
        """The decoding parameters of one call (they go into the cache key and the request)."""
        d: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.top_p is not None:
            d["top_p"] = self.top_p
        if seed is not None:
            d["seed"] = seed
        return d


def load_judge_config(path: str | os.PathLike | None = None, **overrides: Any) -> JudgeConfig:
    """Read a judge config file (``.yaml``/``.yml``, ``.json``, ``.toml``) and apply overrides.

    ``overrides`` with value ``None`` are ignored, so CLI options can be passed straight through.
    Without ``path``, ``overrides`` must at least give ``model``.

    Raises:
        JudgeConfigError: unreadable file, unknown format, missing PyYAML for a YAML file, or a
            bad field (named).
    """
    data: dict[str, Any] = {}
    where = "command-line options"
    if path is not None:
        p = Path(path)
        where = str(p)
        data = _read_mapping(p)
    data.update({k: v for k, v in overrides.items() if v is not None})
    if "api_key" in data:
        raise JudgeConfigError(
            f"{where}: an API key does not belong in a judge config; put it in the environment "
            f"variable named by api_key_env (default OPENAI_API_KEY)"
        )
    try:
        return JudgeConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"field '{'.'.join(str(x) for x in e['loc']) or '?'}': {e['msg']}" for e in exc.errors()
        )
        raise JudgeConfigError(f"{where}: {problems}") from None


def _read_mapping(p: Path) -> dict[str, Any]:
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise JudgeConfigError(f"{p}: cannot read the judge config ({exc.strerror})") from None
    suffix = p.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise JudgeConfigError(
                    f"{p}: reading YAML needs PyYAML (pip install pyyaml); or write the same "
                    "keys as JSON or TOML"
                ) from None
            data = yaml.safe_load(text)
        elif suffix == ".json":
            data = json.loads(text)
        elif suffix == ".toml":
            import tomllib  # Python >= 3.11

            data = tomllib.loads(text)
        else:
            raise JudgeConfigError(f"{p}: judge config must be .yaml, .yml, .json or .toml")
    except JudgeConfigError:
        raise
    except Exception as exc:  # each parser has its own error type
        raise JudgeConfigError(f"{p}: not valid {suffix[1:].upper()} ({exc})") from None
    if not isinstance(data, dict):
        raise JudgeConfigError(f"{p}: the judge config must be a mapping of keys to values")
    return data
