"""Editing models behind web APIs: OpenAI image edits, Gemini image models, any JSON endpoint.

- ``openai-image``: ``POST {base_url}/images/edits`` (multipart: ``model``, ``prompt``,
  ``image``), answer ``{"data": [{"b64_json": ...}]}``; key ``OPENAI_API_KEY``; ``base_url``
  by default ``$OPENAI_BASE_URL``, else the OpenAI API.
- ``gemini-image``: ``POST {base_url}/v1beta/models/{model}:generateContent`` with the image as
  ``inline_data`` and ``responseModalities: ["TEXT", "IMAGE"]``; the image comes back as
  ``inlineData``; key ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``); ``base_url`` by default
  ``$GOOGLE_GEMINI_BASE_URL`` (the variable the ``google-genai`` SDK reads), else the Gemini API.
- ``http``: any endpoint, through a JSON request template and a path to the image in the answer.

In-context demonstrations (``edit_with_examples``, :mod:`medibench.models._examples`):
``openai-image`` sends every image as ``image[]`` (example 1's input, its edited image, ...,
the query last) with one prompt from the versioned template that says which image is which;
``gemini-image`` sends interleaved turns, a user turn (text, input image) and a model turn (the
edited image) per example, then the query's user turn. ``http`` takes no examples.

Keys come from the environment only (a missing one fails when the model is built, naming the
variable). Requests run ``concurrency`` at a time and are retried on 429s, 5xx answers, timeouts
and dropped connections (:mod:`medibench.models._http`). A refusal or content filter raises
:class:`ContentRefusedError` and an answer without an image :class:`NoImageError`; the runner
records either as that sample's failure and goes on. Providers do not promise determinism: the
seed is sent where the API takes one (Gemini, ``http``) and recorded either way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar, Unpack

import numpy as np

from medibench.calls import gemini_base_url, openai_base_url
from medibench.models._base import as_rgb_uint8
from medibench.models._errors import (
    APIError,
    ContentRefusedError,
    CostBudgetSpent,
    MissingAPIKeyError,
    NoImageError,
)
from medibench.models._examples import Demonstration, gemini_turns, openai_image_prompt
from medibench.models._http import (
    EXCERPT_CHARS,
    APIImageModel,
    TransportOptions,
    blocking_form,
    decode_b64,
    decode_image,
    encode_image,
    excerpt,
    json_or_text,
    key_from_env,
    multipart_files,
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


class _TakesExamples(APIImageModel):
    """``edit_with_examples`` for the adapters whose API takes several images (in-context
    demonstrations, :mod:`medibench.models._examples`): each example's input and edited image
    go with the query, and the request counts them all in the cost budget."""

    async def aedit_with_examples(
        self,
        image: np.ndarray,
        instruction: str,
        examples: Sequence[Demonstration],
        *,
        seed: int,
    ) -> np.ndarray:
        """:meth:`aedit` with ``examples`` shown first (the API's own way, module docstring)."""
        if not examples:
            return await self.aedit(image, instruction, seed=seed)
        query = encode_image(as_rgb_uint8(image), self.image_format)
        shown = []
        for ex in examples:
            if ex.output is None:
                raise ValueError(f"demonstration {ex.sample_id!r} has no edited image to show")
            shown.append(
                (
                    encode_image(as_rgb_uint8(ex.input), self.image_format),
                    encode_image(as_rgb_uint8(ex.output), self.image_format),
                )
            )
        n_images = 1 + 2 * len(shown)
        return await self._charged(
            n_images, lambda: self._edit_with(query, instruction, examples, shown, seed)
        )

    edit_with_examples = blocking_form(
        aedit_with_examples,
        "One request with ``examples`` before the query, blocking; no examples: :meth:`edit`.",
    )

    async def _edit_with(
        self,
        query: tuple[bytes, str],
        instruction: str,
        examples: Sequence[Demonstration],
        shown: list[tuple[tuple[bytes, str], tuple[bytes, str]]],
        seed: int,
    ) -> np.ndarray:
        raise NotImplementedError


class OpenAIImageModel(_TakesExamples):
    """OpenAI image edits (``gpt-image-1`` and later; ``dall-e-2`` works too).

    Args:
        model: the API model id (``gpt-image-1``).
        name: the name recorded in runs (default: the model id).
        base_url: the API root; ``None``: ``$OPENAI_BASE_URL``, else
            ``https://api.openai.com/v1`` (any compatible server works).
        size, quality, input_fidelity, background, output_format: passed when set (see the
            OpenAI images API); ``None`` leaves the API's default.
        transport: ``timeout``, ``max_attempts``, ``backoff``, ``max_backoff``, ``concurrency``,
            ``image_format`` (see :class:`~medibench.models._http.TransportOptions`).
    """

    key_env = ("OPENAI_API_KEY",)
    default_base_url = staticmethod(openai_base_url)
    _REFUSAL_CODES = frozenset({"moderation_blocked", "content_policy_violation", "content_filter"})

    def __init__(
        self,
        model: str = "gpt-image-1",
        *,
        name: str | None = None,
        base_url: str | None = None,
        size: str | None = None,
        quality: str | None = None,
        input_fidelity: str | None = None,
        background: str | None = None,
        output_format: str | None = None,
        **transport: Unpack[TransportOptions],
    ) -> None:
        super().__init__(name=name or model, base_url=openai_base_url(base_url), **transport)
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
        ext = "jpg" if self.image_format == "jpeg" else self.image_format
        return await self._post(instruction, [("image", f"image.{ext}", data, mime)])

    async def _edit_with(self, query, instruction, examples, shown, seed) -> np.ndarray:
        # image[] in order: example 1 input, example 1 output, ..., the query last.
        ext = "jpg" if self.image_format == "jpeg" else self.image_format
        uploads = []
        for i, ((src, src_mime), (out, out_mime)) in enumerate(shown, start=1):
            uploads.append(("image[]", f"example{i}_input.{ext}", src, src_mime))
            uploads.append(("image[]", f"example{i}_output.{ext}", out, out_mime))
        uploads.append(("image[]", f"query.{ext}", query[0], query[1]))
        return await self._post(openai_image_prompt(examples, instruction), uploads)

    async def _post(self, prompt: str, uploads: list[tuple[str, str, bytes, str]]) -> np.ndarray:
        form = {"model": self.model, "prompt": prompt, "n": "1", **self.fields}
        if self.model.startswith("dall-e"):
            form["response_format"] = "b64_json"  # gpt-image models always answer in base64
        body, content_type = multipart_files(form, uploads)
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


class GeminiImageModel(_TakesExamples):
    """Gemini image models through ``generateContent`` (image in, image out).

    Args:
        model: the model id (``gemini-2.5-flash-image``).
        name: the name recorded in runs (default: the model id).
        base_url: the API root; ``None``: ``$GOOGLE_GEMINI_BASE_URL``, else
            ``https://generativelanguage.googleapis.com``.
        temperature: sampling temperature (``None``: the API's default). The item's seed is sent
            as ``generationConfig.seed``.
        Other options as :class:`OpenAIImageModel`.
    """

    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    default_base_url = staticmethod(gemini_base_url)
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
        base_url: str | None = None,
        temperature: float | None = None,
        **transport: Unpack[TransportOptions],
    ) -> None:
        super().__init__(name=name or model, base_url=gemini_base_url(base_url), **transport)
        self.model = model
        self.temperature = temperature

    async def _edit(self, data: bytes, mime: str, instruction: str, seed: int) -> np.ndarray:
        return await self._edit_with((data, mime), instruction, (), [], seed)

    async def _edit_with(self, query, instruction, examples, shown, seed) -> np.ndarray:
        # Interleaved turns: per example a user turn (text, input) and a model turn (output).
        config: dict[str, Any] = {"responseModalities": ["TEXT", "IMAGE"], "seed": int(seed)}
        if self.temperature is not None:
            config["temperature"] = self.temperature
        turns = [
            (ex.instruction, _inline(*src), _inline(*out))
            for ex, (src, out) in zip(examples, shown, strict=True)
        ]
        if turns:
            contents = gemini_turns(turns, instruction, _inline(*query))
        else:  # no examples: the request as it always was
            parts = [{"text": instruction}, _inline(*query)]
            contents = [{"role": "user", "parts": parts}]
        payload = {"contents": contents, "generationConfig": config}
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
def _inline(data: bytes, mime: str) -> dict[str, Any]:
    return {"inline_data": {"mime_type": mime, "data": to_base64(data)}}


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
