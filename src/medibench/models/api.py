"""Editing models behind web APIs: OpenAI image edits, Gemini image models, any JSON endpoint.

- ``openai-image``: ``POST {base_url}/images/edits`` (multipart: ``model``, ``prompt``,
  ``image``), answer ``{"data": [{"b64_json": ...}]}``; key ``OPENAI_API_KEY``.
- ``gemini-image``: ``POST {base_url}/v1beta/models/{model}:generateContent`` with the image as
  ``inline_data`` and ``responseModalities: ["TEXT", "IMAGE"]``; the image comes back as
  ``inlineData``; key ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``).
- ``http``: any endpoint, through a JSON request template and a path to the image in the answer.

Keys come from the environment only (a missing one fails when the model is built, naming the
variable). Requests run ``concurrency`` at a time and are retried on 429s, 5xx answers, timeouts
and dropped connections (:mod:`medibench.models._http`). A refusal or content filter raises
:class:`ContentRefusedError` and an answer without an image :class:`NoImageError`; the runner
records either as that sample's failure and goes on. Providers do not promise determinism: the
seed is sent where the API takes one (Gemini, ``http``) and recorded either way.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Unpack

import numpy as np

from medibench.models._errors import (
    APIError,
    ContentRefusedError,
    CostBudgetSpent,
    MissingAPIKeyError,
    NoImageError,
)
from medibench.models._http import (
    EXCERPT_CHARS,
    APIImageModel,
    TransportOptions,
    decode_b64,
    decode_image,
    encode_image,
    excerpt,
    json_or_text,
    key_from_env,
    multipart_body,
    to_base64,
)

__all__ = [
    "APIError",
    "ContentRefusedError",
    "CostBudgetSpent",
    "GeminiImageModel",
    "HTTPImageModel",
    "MissingAPIKeyError",
    "NoImageError",
    "OpenAIImageModel",
    "decode_image",
    "encode_image",
]


class OpenAIImageModel(APIImageModel):
    """OpenAI image edits (``gpt-image-1`` and later; ``dall-e-2`` works too).

    Args:
        model: the API model id (``gpt-image-1``).
        name: the name recorded in runs (default: the model id).
        base_url: the API root (``https://api.openai.com/v1``); any compatible server works.
        size, quality, input_fidelity, background, output_format: passed when set (see the
            OpenAI images API); ``None`` leaves the API's default.
        transport: ``timeout``, ``max_attempts``, ``backoff``, ``max_backoff``, ``concurrency``,
            ``image_format`` (see :class:`~medibench.models._http.TransportOptions`).
    """

    key_env = ("OPENAI_API_KEY",)
    _REFUSAL_CODES = frozenset({"moderation_blocked", "content_policy_violation", "content_filter"})

    def __init__(
        self,
        model: str = "gpt-image-1",
        *,
        name: str | None = None,
        base_url: str = "https://api.openai.com/v1",
        size: str | None = None,
        quality: str | None = None,
        input_fidelity: str | None = None,
        background: str | None = None,
        output_format: str | None = None,
        **transport: Unpack[TransportOptions],
    ) -> None:
        super().__init__(name=name or model, base_url=base_url, **transport)
        self.model = model
        fields = dict(
            size=size,
            quality=quality,
            input_fidelity=input_fidelity,
            background=background,
            output_format=output_format,
        )
        self.fields = {k: v for k, v in fields.items() if v is not None}

    async def _edit(self, data: bytes, mime: str, instruction: str, seed: int) -> np.ndarray:
        form = {"model": self.model, "prompt": instruction, "n": "1", **self.fields}
        if self.model.startswith("dall-e"):
            form["response_format"] = "b64_json"  # gpt-image models always answer in base64
        ext = "jpg" if self.image_format == "jpeg" else self.image_format
        body, content_type = multipart_body(form, "image", f"image.{ext}", data, mime)
        resp = await self._request(
            "POST",
            f"{self.base_url}/images/edits",
            headers={"Authorization": f"Bearer {self._key}", "Content-Type": content_type},
            content=body,
        )
        body = json_or_text(resp)
        try:
            b64 = body["data"][0]["b64_json"]
        except (TypeError, KeyError, IndexError):
            raise NoImageError(
                f"{self.name}: the answer has no data[0].b64_json image: {excerpt(body)}",
                status=resp.status_code,
            ) from None
        return decode_b64(b64, self.name)

    def _refusal(self, status: int, body: Any) -> str | None:
        err = body.get("error") if isinstance(body, dict) else None
        if not isinstance(err, dict):
            return None
        code, message = str(err.get("code") or ""), str(err.get("message") or "")
        if code in self._REFUSAL_CODES or "safety system" in message.lower():
            return f"{code or 'content policy'}: {message[:EXCERPT_CHARS]}"
        return None


class GeminiImageModel(APIImageModel):
    """Gemini image models through ``generateContent`` (image in, image out).

    Args:
        model: the model id (``gemini-2.5-flash-image``).
        name: the name recorded in runs (default: the model id).
        base_url: the API root (``https://generativelanguage.googleapis.com``).
        temperature: sampling temperature (``None``: the API's default). The item's seed is sent
            as ``generationConfig.seed``.
        Other options as :class:`OpenAIImageModel`.
    """

    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    _BLOCKED = frozenset(
        {
            "SAFETY",
            "IMAGE_SAFETY",
            "PROHIBITED_CONTENT",
            "IMAGE_PROHIBITED_CONTENT",
            "BLOCKLIST",
            "SPII",
            "RECITATION",
            "IMAGE_RECITATION",
        }
    )

    def __init__(
        self,
        model: str = "gemini-2.5-flash-image",
        *,
        name: str | None = None,
        base_url: str = "https://generativelanguage.googleapis.com",
        temperature: float | None = None,
        **transport: Unpack[TransportOptions],
    ) -> None:
        super().__init__(name=name or model, base_url=base_url, **transport)
        self.model = model
        self.temperature = temperature

    async def _edit(self, data: bytes, mime: str, instruction: str, seed: int) -> np.ndarray:
        config: dict[str, Any] = {"responseModalities": ["TEXT", "IMAGE"], "seed": int(seed)}
        if self.temperature is not None:
            config["temperature"] = self.temperature
        payload = {
            "contents": [
                {
                    "role": "user",
                    "parts": [
                        {"text": instruction},
                        {"inline_data": {"mime_type": mime, "data": to_base64(data)}},
                    ],
                }
            ],
            "generationConfig": config,
        }
        resp = await self._request(
            "POST",
            f"{self.base_url}/v1beta/models/{self.model}:generateContent",
            headers={"x-goog-api-key": self._key or ""},
            json=payload,
        )
        return self._image_from(json_or_text(resp), resp.status_code)

    def _image_from(self, body: Any, status: int) -> np.ndarray:
        if not isinstance(body, dict):
            raise NoImageError(
                f"{self.name}: the answer is not JSON: {excerpt(body)}", status=status
            )
        blocked = (body.get("promptFeedback") or {}).get("blockReason")
        if blocked:
            raise ContentRefusedError(
                f"{self.name}: refused: prompt blocked ({blocked})", status=status
            )
        texts = []
        for cand in body.get("candidates") or []:
            for part in (cand.get("content") or {}).get("parts") or []:
                inline = part.get("inlineData") or part.get("inline_data")
                mime = (inline or {}).get("mimeType") or (inline or {}).get("mime_type") or ""
                if inline and mime.startswith("image/") and inline.get("data"):
                    return decode_b64(inline["data"], self.name)
                if part.get("text"):
                    texts.append(part["text"])
            reason = cand.get("finishReason")
            if reason in self._BLOCKED:
                raise ContentRefusedError(
                    f"{self.name}: refused: finishReason {reason}", status=status
                )
        said = f"; the model said: {' '.join(texts)[:EXCERPT_CHARS]!r}" if texts else ""
        raise NoImageError(f"{self.name}: the answer holds no image{said}", status=status)


class HTTPImageModel(APIImageModel):
    """Any JSON image-editing endpoint, described by a request template.

    The request body is ``body`` with these placeholders filled in (a string that is exactly a
    placeholder takes its value's type, so ``"{seed}"`` becomes a number): ``{instruction}``,
    ``{image_b64}``, ``{image_data_url}``, ``{mime_type}``, ``{seed}``. Header values may name
    environment variables as ``{env:NAME}`` (checked when the model is built).

    Args:
        url: the endpoint.
        body: the JSON request template (a mapping, or its JSON text).
        image_field: dotted path to the base64 image in the JSON answer (``data.0.b64_json``);
            a ``data:`` URL works too. An answer whose content type is ``image/*`` is the image.
        refusal_field: dotted path that, when present and truthy, marks a refusal.
        headers: extra headers (``{"Authorization": "Bearer {env:MY_KEY}"}``).
        name: the name recorded in runs (``http``). Other options as :class:`OpenAIImageModel`.
    """

    spec_argument = "url"
    _DEFAULT_BODY: ClassVar[dict[str, Any]] = {
        "prompt": "{instruction}",
        "image": "{image_b64}",
        "mime_type": "{mime_type}",
        "seed": "{seed}",
    }

    def __init__(
        self,
        url: str,
        *,
        body: dict[str, Any] | str | None = None,
        image_field: str = "image",
        refusal_field: str | None = None,
        headers: dict[str, str] | None = None,
        name: str = "http",
        **transport: Unpack[TransportOptions],
    ) -> None:
        super().__init__(name=name, base_url=url, **transport)
        self.url = url
        self.body = json.loads(body) if isinstance(body, str) else (body or self._DEFAULT_BODY)
        self.image_field = image_field
        self.refusal_field = refusal_field
        self._headers = {k: _fill_env(str(v)) for k, v in (headers or {}).items()}

    async def _edit(self, data: bytes, mime: str, instruction: str, seed: int) -> np.ndarray:
        b64 = to_base64(data)
        values = {
            "{instruction}": instruction,
            "{image_b64}": b64,
            "{image_data_url}": f"data:{mime};base64,{b64}",
            "{mime_type}": mime,
            "{seed}": int(seed),
        }
        resp = await self._request(
            "POST", self.url, headers=self._headers, json=_fill(self.body, values)
        )
        if resp.headers.get("content-type", "").startswith("image/"):
            return decode_image(resp.content, where=self.name)
        body = json_or_text(resp)
        if self.refusal_field and _dig(body, self.refusal_field):
            reason = _dig(body, self.refusal_field)
            raise ContentRefusedError(
                f"{self.name}: refused: {excerpt(reason)}", status=resp.status_code
            )
        b64_image = _dig(body, self.image_field)
        if not isinstance(b64_image, str) or not b64_image:
            raise NoImageError(
                f"{self.name}: the answer has no image at '{self.image_field}': {excerpt(body)}",
                status=resp.status_code,
            )
        return decode_b64(b64_image, self.name)


# -- request templates ----------------------------------------------------------------------
def _fill_env(value: str) -> str:
    while "{env:" in value:
        start = value.index("{env:")
        end = value.index("}", start)
        var = value[start + 5 : end]
        value = value[:start] + key_from_env((var,)) + value[end + 1 :]
    return value


def _fill(template: Any, values: dict[str, Any]) -> Any:
    if isinstance(template, dict):
        return {k: _fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, values) for v in template]
    if isinstance(template, str):
        if template in values:
            return values[template]
        for key, value in values.items():
            template = template.replace(key, str(value))
    return template


def _dig(body: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(body, dict):
            body = body.get(part)
        elif isinstance(body, list) and part.isdigit() and int(part) < len(body):
            body = body[int(part)]
        else:
            return None
    return body
