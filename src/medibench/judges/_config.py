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

from pydantic import ConfigDict, Field, ValidationError

from medibench.calls import MissingAPIKeyError
from medibench.calls._chat import ChatConfig

__all__ = ["JudgeConfig", "JudgeConfigError", "MissingApiKeyError", "load_judge_config"]


class JudgeConfigError(ValueError):
    """A judge config file that cannot be read or has a bad field (the message names both)."""


#: The call layer's one missing-key error (the judges' older name for it).
MissingApiKeyError = MissingAPIKeyError


class JudgeConfig(ChatConfig):
    """How to reach and drive one judge model: the chat model's settings
    (:class:`medibench.calls.ChatConfig`: ``model``, ``base_url``, ``api_key_env``,
    ``api_key_required``, decoding, ``concurrency``, retries, ``timeout_s``,
    ``max_image_side``) and what judging adds.

    ``model``, ``base_url`` and the decoding parameters are part of the cache key; pass ``p``
    of ``--passes N`` is sent with seed ``seed + p``.

    Attributes:
        structured_output: what the server supports: ``"json_schema"`` (strict schema),
            ``"json_object"`` (any JSON) or ``"none"`` (free text, parsed tolerantly).
        oversize: an image over ``max_image_side`` is resized (``"resize"``, recorded) or
            refused with an error (``"refuse"``).
        price_input_per_mtok, price_output_per_mtok: USD per million tokens, for cost records,
            dry-run estimates and ``--max-cost``. ``None`` = unknown (cost not recorded).
        est_image_tokens, est_output_tokens: dry-run guesses per image and per answer, used
            until the run has judged answers with real usage.
    """

    model_config = ConfigDict(extra="forbid")

    structured_output: Literal["none", "json_object", "json_schema"] = "none"
    oversize: Literal["resize", "refuse"] = "resize"
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    est_image_tokens: int = Field(default=800, ge=0)
    est_output_tokens: int = Field(default=400, ge=0)

    _who: str = "the judge"

    @property
    def has_prices(self) -> bool:
        return self.price_input_per_mtok is not None and self.price_output_per_mtok is not None

    def cost(self, input_tokens: int | None, output_tokens: int | None) -> float | None:
        """USD for one call, or ``None`` when the prices or the usage are unknown."""
        price_in, price_out = self.price_input_per_mtok, self.price_output_per_mtok
        if price_in is None or price_out is None or input_tokens is None or output_tokens is None:
            return None
        return (input_tokens * price_in + output_tokens * price_out) / 1e6


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
