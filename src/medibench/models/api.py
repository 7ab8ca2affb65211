"""Editing models behind web APIs: OpenAI image edits, Gemini image models, any JSON endpoint.

- ``openai-image``: ``POST {base_url}/images/edits`` (multipart: ``model``, ``prompt``,
  ``image``), answer ``{"data": [{"b64_json": ...}]}``; key ``OPENAI_API_KEY``.
- ``gemini-image``: ``POST {base_url}/v1beta/models/{model}:generateContent`` with the image as
  ``inline_data`` and ``responseModalities: ["TEXT", "IMAGE"]``; the image comes back as
  ``inlineData``; key ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``).
- ``http``: any endpoint, through a JSON request template and a path to the image in the answer.

Keys come from the environment only (a missing one fails when the model is built, naming the
variable) and never reach a log, an error message or the run store. Images are sent as PNG (or
``image_format``) with the matching MIME type. Each adapter is async at heart (:meth:`aedit`):
the runner keeps ``concurrency`` requests in flight; ``edit`` is the one-at-a-time form. 429s,
5xx answers, timeouts and dropped connections are retried with jittered exponential backoff
(``Retry-After`` is honoured). A refusal or content filter raises :class:`ContentRefusedError`
and an answer without an image :class:`NoImageError`; the runner records either as that sample's
failure and goes on. Providers do not promise determinism: the seed is sent where the API takes
one (Gemini, ``http``) and recorded either way.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import random
import threading
from typing import Any, ClassVar

import numpy as np

from medibench.models._base import as_rgb_uint8

__all__ = [
    "APIError",
    "ContentRefusedError",
    "GeminiImageModel",
    "HTTPImageModel",
    "MissingAPIKeyError",
    "NoImageError",
    "OpenAIImageModel",
    "decode_image",
    "encode_image",
]

_MIME = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
_RETRY_STATUS = {408, 409, 425, 429}
_EXCERPT = 300


class APIError(RuntimeError):
    """An API call that failed for good; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ContentRefusedError(APIError):
    """The provider refused the request or filtered the output (safety, content policy)."""


class NoImageError(APIError):
    """The answer was well-formed HTTP but held no image (malformed body, text-only answer)."""


class MissingAPIKeyError(ValueError):
    """An API key that is not set in the environment; the message names the variable."""


class _APIImageModel:
    """Requests, retries, per-event-loop clients and image encoding shared by the adapters."""

    #: ``NAME:ARG`` on the command line fills this option.
    spec_argument: ClassVar[str] = "model"
    key_env: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        timeout: float,
        retries: int,
        backoff: float,
        max_backoff: float,
        concurrency: int,
        image_format: str,
    ) -> None:
        if image_format not in _MIME:
            raise ValueError(f"image_format must be one of {sorted(_MIME)}, not {image_format!r}")
        if concurrency < 1 or retries < 0 or timeout <= 0:
            raise ValueError("concurrency >= 1, retries >= 0 and timeout > 0 are required")
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.concurrency = int(concurrency)
        self.image_format = image_format
        self._key = _key_from_env(self.key_env) if self.key_env else None
        self._per_loop: dict[int, tuple[Any, Any, asyncio.Semaphore]] = {}
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._sync_lock = threading.Lock()
        self._jitter = random.Random()

    # -- the EditModel contract ---------------------------------------------------------------
    def edit(self, image: np.ndarray, instruction: str, *, seed: int) -> np.ndarray:
        """One request, blocking; see :meth:`aedit`."""
        with self._sync_lock:
            if self._sync_loop is None:
                self._sync_loop = asyncio.new_event_loop()
            return self._sync_loop.run_until_complete(self.aedit(image, instruction, seed=seed))

    async def aedit(self, image: np.ndarray, instruction: str, *, seed: int) -> np.ndarray:
        """Edit ``image`` (uint8 RGB); returns the answer's image at its own size and mode."""
        data, mime = encode_image(as_rgb_uint8(image), self.image_format)
        return await self._edit(data, mime, instruction, seed)

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop."""
        state = self._per_loop.pop(id(asyncio.get_running_loop()), None)
        if state is not None:
            await state[1].aclose()

    def close(self) -> None:
        """Close the blocking form's client and event loop."""
        with self._sync_lock:
            if self._sync_loop is not None:
                self._sync_loop.run_until_complete(self.aclose())
                self._sync_loop.close()
                self._sync_loop = None

    # -- subclass hooks -----------------------------------------------------------------------
    async def _edit(self, data: bytes, mime: str, instruction: str, seed: int) -> np.ndarray:
        raise NotImplementedError

    def _refusal(self, status: int, body: Any) -> str | None:
        """A refusal reason when a 4xx answer is a content-filter refusal, else ``None``."""
        return None

    # -- requests with retries ----------------------------------------------------------------
    async def _request(self, method: str, url: str, **kwargs: Any):
        """Send with retries on 429/5xx/timeouts; return the successful ``httpx.Response``."""
        import httpx

        client, sem = self._client()
        attempts = self.retries + 1
        for attempt in range(attempts):
            retry_after = None
            try:
                async with sem:
                    resp = await client.request(method, url, **kwargs)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                what = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
                problem = f"request {what} ({type(exc).__name__})"
                status = None
            else:
                if resp.status_code < 400:
                    return resp
                body = _json_or_text(resp)
                if resp.status_code not in _RETRY_STATUS and resp.status_code < 500:
                    reason = self._refusal(resp.status_code, body)
                    if reason:
                        raise ContentRefusedError(
                            f"{self.name}: refused: {reason}", status=resp.status_code
                        )
                    raise APIError(
                        f"{self.name}: HTTP {resp.status_code}: {_excerpt(body)}",
                        status=resp.status_code,
                    )
                problem = f"HTTP {resp.status_code}: {_excerpt(body)}"
                status = resp.status_code
                retry_after = resp.headers.get("retry-after")
            if attempt + 1 == attempts:
                raise APIError(f"{self.name}: {problem} after {attempts} attempts", status=status)
            await asyncio.sleep(self._delay(attempt, retry_after))
        raise AssertionError("unreachable")

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """Jittered exponential backoff: ``backoff * 2**attempt`` (capped), times 0.5 to 1."""
        cap = min(self.max_backoff, self.backoff * 2**attempt)
        delay = cap * (0.5 + 0.5 * self._jitter.random())
        if retry_after:
            try:
                delay = max(delay, min(self.max_backoff, float(retry_after)))
            except ValueError:  # an HTTP date: fall back to our own schedule
                pass
        return delay

    def _client(self):
        # httpx.AsyncClient and asyncio.Semaphore belong to one event loop: one pair per loop.
        import httpx

        loop = asyncio.get_running_loop()
        state = self._per_loop.get(id(loop))
        if state is None or state[0] is not loop:
            n = max(self.concurrency, 1)
            limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
            client = httpx.AsyncClient(timeout=self.timeout, limits=limits)
            state = (loop, client, asyncio.Semaphore(self.concurrency))
            self._per_loop[id(loop)] = state
        return state[1], state[2]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"


class OpenAIImageModel(_APIImageModel):
    """OpenAI image edits (``gpt-image-1`` and later; ``dall-e-2`` works too).

    Args:
        model: the API model id (``gpt-image-1``).
        name: the name recorded in runs (default: the model id).
        base_url: the API root (``https://api.openai.com/v1``); any compatible server works.
        size, quality, input_fidelity, background, output_format: passed when set (see the
            OpenAI images API); ``None`` leaves the API's default.
        timeout: seconds per request. retries: retries after the first attempt.
        backoff, max_backoff: first and largest retry delay in seconds.
        concurrency: requests in flight (the runner's default worker count for this model).
        image_format: how the input is sent: ``png`` (lossless), ``jpeg`` or ``webp``.
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
        timeout: float = 300.0,
        retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        concurrency: int = 8,
        image_format: str = "png",
    ) -> None:
        super().__init__(
            name=name or model,
            base_url=base_url,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_backoff=max_backoff,
            concurrency=concurrency,
            image_format=image_format,
        )
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
        body, content_type = _multipart(form, "image", f"image.{ext}", data, mime)
        resp = await self._request(
            "POST",
            f"{self.base_url}/images/edits",
            headers={"Authorization": f"Bearer {self._key}", "Content-Type": content_type},
            content=body,
        )
        body = _json_or_text(resp)
        try:
            b64 = body["data"][0]["b64_json"]
        except (TypeError, KeyError, IndexError):
            raise NoImageError(
                f"{self.name}: the answer has no data[0].b64_json image: {_excerpt(body)}",
                status=resp.status_code,
            ) from None
        return _decode_b64(b64, self.name)

    def _refusal(self, status: int, body: Any) -> str | None:
        err = body.get("error") if isinstance(body, dict) else None
        if not isinstance(err, dict):
            return None
        code, message = str(err.get("code") or ""), str(err.get("message") or "")
        if code in self._REFUSAL_CODES or "safety system" in message.lower():
            return f"{code or 'content policy'}: {message[:_EXCERPT]}"
        return None


class GeminiImageModel(_APIImageModel):
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
        timeout: float = 300.0,
        retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        concurrency: int = 8,
        image_format: str = "png",
    ) -> None:
        super().__init__(
            name=name or model,
            base_url=base_url,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_backoff=max_backoff,
            concurrency=concurrency,
            image_format=image_format,
        )
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
                        {"inline_data": {"mime_type": mime, "data": _b64(data)}},
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
        return self._image_from(_json_or_text(resp), resp.status_code)

    def _image_from(self, body: Any, status: int) -> np.ndarray:
        if not isinstance(body, dict):
            raise NoImageError(
                f"{self.name}: the answer is not JSON: {_excerpt(body)}", status=status
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
                    return _decode_b64(inline["data"], self.name)
                if part.get("text"):
                    texts.append(part["text"])
            reason = cand.get("finishReason")
            if reason in self._BLOCKED:
                raise ContentRefusedError(
                    f"{self.name}: refused: finishReason {reason}", status=status
                )
        said = f"; the model said: {' '.join(texts)[:_EXCERPT]!r}" if texts else ""
        raise NoImageError(f"{self.name}: the answer holds no image{said}", status=status)


class HTTPImageModel(_APIImageModel):
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
        timeout: float = 300.0,
        retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        concurrency: int = 8,
        image_format: str = "png",
    ) -> None:
        super().__init__(
            name=name,
            base_url=url,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_backoff=max_backoff,
            concurrency=concurrency,
            image_format=image_format,
        )
        self.url = url
        self.body = json.loads(body) if isinstance(body, str) else (body or self._DEFAULT_BODY)
        self.image_field = image_field
        self.refusal_field = refusal_field
        self._headers = {k: _fill_env(str(v)) for k, v in (headers or {}).items()}

    async def _edit(self, data: bytes, mime: str, instruction: str, seed: int) -> np.ndarray:
        b64 = _b64(data)
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
        body = _json_or_text(resp)
        if self.refusal_field and _dig(body, self.refusal_field):
            reason = _dig(body, self.refusal_field)
            raise ContentRefusedError(
                f"{self.name}: refused: {_excerpt(reason)}", status=resp.status_code
            )
        b64_image = _dig(body, self.image_field)
        if not isinstance(b64_image, str) or not b64_image:
            raise NoImageError(
                f"{self.name}: the answer has no image at '{self.image_field}': {_excerpt(body)}",
                status=resp.status_code,
            )
        return _decode_b64(b64_image, self.name)


# -- images ---------------------------------------------------------------------------------
def encode_image(image: np.ndarray, image_format: str = "png") -> tuple[bytes, str]:
    """Encode an RGB uint8 image; returns the bytes and their MIME type."""
    import cv2

    bgr = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2BGR)
    ext = {"png": ".png", "jpeg": ".jpg", "webp": ".webp"}[image_format]
    params = [cv2.IMWRITE_JPEG_QUALITY, 95] if image_format == "jpeg" else []
    ok, buf = cv2.imencode(ext, bgr, params)
    if not ok:
        raise ValueError(f"OpenCV could not encode the image as {image_format}")
    return buf.tobytes(), _MIME[image_format]


def decode_image(data: bytes, *, where: str = "answer") -> np.ndarray:
    """Decode PNG/JPEG/WebP bytes to uint8: ``(H, W)`` gray, ``(H, W, 3)`` RGB or RGBA.

    The mode is kept (an RGBA or gray answer is stored as such; the protocol converts it).
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            if im.mode not in ("L", "RGB", "RGBA"):
                has_alpha = "A" in im.getbands() or "transparency" in im.info
                im = im.convert("RGBA" if has_alpha else "RGB")
            return np.asarray(im, dtype=np.uint8).copy()
    except (UnidentifiedImageError, OSError) as exc:
        raise NoImageError(f"{where}: the answer's image cannot be decoded ({exc})") from None


def _decode_b64(text: str, where: str) -> np.ndarray:
    if text.startswith("data:"):
        text = text.partition(",")[2]
    try:
        data = base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        raise NoImageError(f"{where}: the answer's image is not valid base64") from None
    return decode_image(data, where=where)


def _multipart(
    fields: dict[str, str], file_field: str, filename: str, data: bytes, mime: str
) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body in one piece (httpx streams its own in many small writes,
    which costs its connection pool more CPU than the request is worth under concurrency)."""
    boundary = os.urandom(16).hex()
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; '
        f'filename="{filename}"\r\nContent-Type: {mime}\r\n\r\n'
    )
    body = b"".join([*parts, head.encode(), data, f"\r\n--{boundary}--\r\n".encode()])
    return body, f"multipart/form-data; boundary={boundary}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# -- helpers --------------------------------------------------------------------------------
def _key_from_env(names: tuple[str, ...]) -> str:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    either = " or ".join(names)
    raise MissingAPIKeyError(f"set the API key in the environment variable {either}")


def _fill_env(value: str) -> str:
    while "{env:" in value:
        start = value.index("{env:")
        end = value.index("}", start)
        var = value[start + 5 : end]
        value = value[:start] + _key_from_env((var,)) + value[end + 1 :]
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


def _json_or_text(resp) -> Any:
    try:
        return resp.json()
    except ValueError:
        return resp.text


def _excerpt(body: Any) -> str:
    text = body if isinstance(body, str) else json.dumps(body)
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "..."
