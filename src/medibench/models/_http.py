"""The HTTP machinery the web-API models share: requests, retries, concurrency, keys, images.

Each adapter is async at heart (:meth:`APIImageModel.aedit`): the runner keeps ``concurrency``
requests in flight; ``edit`` is the one-at-a-time form. 429s, 5xx answers, timeouts and dropped
connections are retried with jittered exponential backoff (``Retry-After`` is honoured); other 4xx
answers fail at once, as :class:`ContentRefusedError` when the adapter reads them as a refusal.
The retry loop, the concurrency bound (:class:`medibench.calls.CallSlots`), the run's cost budget
(:class:`medibench.calls.CostBudget`, charged ``price_per_image`` per answered request), the key
lookup and the redaction are :mod:`medibench.calls`' (one for every client, judges included).
Images are sent as PNG (or ``image_format``) with the matching MIME type. Keys come from the
environment only; every error message is redacted (the keys in use and anything shaped like a
key), so none reaches a log, an export or the run store.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import json
import os
import random
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, ClassVar, Concatenate, ParamSpec, TypedDict, TypeVar

import numpy as np

from medibench.calls import CallSlots, CostBudget, RetryPolicy, b64_text, redact, send
from medibench.calls import key_from_env as _key_from_env
from medibench.models._base import SharedOptions, as_rgb_uint8
from medibench.models._errors import (
    APIError,
    ContentRefusedError,
    CostBudgetSpent,
    NoImageError,
)

__all__ = [
    "EXCERPT_CHARS",
    "APIImageModel",
    "TransportOptions",
    "blocking_form",
    "decode_b64",
    "decode_image",
    "encode_image",
    "excerpt",
    "json_or_text",
    "key_from_env",
    "multipart_body",
    "multipart_files",
    "to_base64",
]

P = ParamSpec("P")
R = TypeVar("R")

_MIME = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
#: Characters of an answer quoted in an error message.
EXCERPT_CHARS = 300


class TransportOptions(TypedDict, total=False):
    """The options every web-API model takes besides its own (defaults: ``__init__`` below).

    ``timeout``: seconds per request; ``max_attempts``: attempts per request, the first
    included (the old ``retries=N`` is read as ``max_attempts=N+1``);
    ``backoff``, ``max_backoff``: first and largest retry delay in seconds; ``concurrency``:
    requests in flight (the runner's default worker count for the model); ``image_format``: how
    the input is sent: ``png`` (lossless), ``jpeg`` or ``webp``; ``price_per_image``: USD per
    answered request (the provider's price for one edit), charged to the run's cost budget
    (``--max-cost``); ``None``: unknown (a run with ``--max-cost`` then refuses the model);
    ``price_per_input_image``: USD per image a request sends (the query's and each in-context
    demonstration's), added to ``price_per_image`` (``None``: nothing).
    """

    timeout: float
    max_attempts: int
    backoff: float
    max_backoff: float
    concurrency: int
    image_format: str
    price_per_image: float | None
    price_per_input_image: float | None


def blocking_form(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]], doc: str
) -> Callable[Concatenate[Any, P], R]:
    """The blocking form of the async ``method`` (``aedit`` -> ``edit``): the same parameters,
    run on the model's own event loop; a subclass's override of ``method`` is the one run."""
    name = method.__name__

    @functools.wraps(method)
    def run(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._blocking(lambda: getattr(self, name)(*args, **kwargs))

    run.__name__ = name.removeprefix("a")
    run.__qualname__ = f"{method.__qualname__.rpartition('.')[0]}.{run.__name__}"
    run.__doc__ = doc
    return run


class APIImageModel(SharedOptions):
    """Requests, retries, per-event-loop clients and image encoding shared by the adapters.

    A subclass's ``__init__`` takes its own options and ``**transport: Unpack[TransportOptions]``,
    passed on to this one; the class's signature lists both.
    """

    common_options = TransportOptions

    #: ``NAME:ARG`` on the command line fills this option.
    spec_argument: ClassVar[str] = "model"
    key_env: ClassVar[tuple[str, ...]] = ()
    #: ``(base_url, environ) -> URL``: where a ``base_url`` of ``None`` points (the provider's
    #: environment variable, else its public API; :mod:`medibench.calls._endpoints`)
    default_base_url: ClassVar[Callable[..., str] | None] = None
    #: the run's cost budget, set by the runner for ``--max-cost`` (``None``: no limit)
    cost_budget: CostBudget | None = None

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        timeout: float = 300.0,
        max_attempts: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        concurrency: int = 8,
        image_format: str = "png",
        price_per_image: float | None = None,
        price_per_input_image: float | None = None,
    ) -> None:
        if image_format not in _MIME:
            raise ValueError(f"image_format must be one of {sorted(_MIME)}, not {image_format!r}")
        if concurrency < 1 or max_attempts < 1 or timeout <= 0:
            raise ValueError("concurrency >= 1, max_attempts >= 1 and timeout > 0 are required")
        if price_per_image is not None and not price_per_image >= 0:
            raise ValueError(f"price_per_image must be >= 0 (USD), got {price_per_image}")
        self.price_per_image = None if price_per_image is None else float(price_per_image)
        if price_per_input_image is not None and not price_per_input_image >= 0:
            raise ValueError(
                f"price_per_input_image must be >= 0 (USD), got {price_per_input_image}"
            )
        self.price_per_input_image = (
            None if price_per_input_image is None else float(price_per_input_image)
        )
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)
        self.max_attempts = int(max_attempts)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self._slots = CallSlots(int(concurrency), timeout=self.timeout)
        self.image_format = image_format
        self._key = key_from_env(self.key_env) if self.key_env else None
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._sync_lock = threading.Lock()
        self._jitter = random.Random()

    @classmethod
    def resolve_options(
        cls, options: Mapping[str, Any], environ: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """``options`` as the model will use them: a ``base_url`` of ``None`` becomes the URL
        its calls go to (what a run records, so a run names the server it was made with)."""
        out = dict(options)
        if cls.default_base_url is not None and "base_url" in out:
            out["base_url"] = cls.default_base_url(out["base_url"], environ)
        return out

    # -- the EditModel contract ---------------------------------------------------------------
    def _blocking(self, make: Any) -> Any:
        """Run the coroutine ``make()`` on this model's own event loop (the blocking forms)."""
        with self._sync_lock:
            if self._sync_loop is None:
                self._sync_loop = asyncio.new_event_loop()
            return self._sync_loop.run_until_complete(make())

    async def aedit(self, image: np.ndarray, instruction: str, *, seed: int) -> np.ndarray:
        """Edit ``image`` (uint8 RGB); returns the answer's image at its own size and mode.

        With a :attr:`cost_budget`, the request is sent only if ``price_per_image`` more stays
        within it (else :class:`CostBudgetSpent`, nothing sent); an answered request (an image,
        or a 2xx answer without one) is charged ``price_per_image``, a failed one nothing.
        """
        data, mime = encode_image(as_rgb_uint8(image), self.image_format)
        return await self._charged(1, lambda: self._edit(data, mime, instruction, seed))

    edit = blocking_form(aedit, "One request, blocking; see :meth:`aedit`.")

    async def _charged(self, images_sent: int, send: Any) -> np.ndarray:
        """Await ``send()`` (one request carrying ``images_sent`` images) within the run's cost
        budget: the request costs ``price_per_image`` plus ``price_per_input_image`` per image
        sent (in-context demonstrations count), reserved before and settled after."""
        budget = self.cost_budget
        price = self.request_price(images_sent)
        estimate = price or 0.0
        if budget is not None and not budget.reserve(estimate):
            raise CostBudgetSpent(
                f"{self.name}: not sent: the run's cost budget of {budget.max_cost:g} USD is "
                f"spent (a larger --max-cost resumes)"
            )
        cost = None
        try:
            out = await send()
            cost = price
            return out
        except APIError as exc:  # one last pass: no adapter's message may carry a key
            if isinstance(exc, NoImageError):  # answered (and billed) without an image
                cost = price
            exc.args = tuple(redact(a) if isinstance(a, str) else a for a in exc.args)
            raise
        finally:
            if budget is not None:
                budget.settle(estimate, cost)

    def request_price(self, images_sent: int) -> float | None:
        """USD for one answered request carrying ``images_sent`` images: ``price_per_image``
        plus ``price_per_input_image`` per image; ``None`` when ``price_per_image`` is."""
        if self.price_per_image is None:
            return None
        return self.price_per_image + (self.price_per_input_image or 0.0) * int(images_sent)

    @property
    def concurrency(self) -> int:
        """Requests in flight at once (the runner may raise it for ``--workers``)."""
        return self._slots.concurrency

    @concurrency.setter
    def concurrency(self, value: int) -> None:
        self._slots.concurrency = int(value)

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop."""
        await self._slots.aclose()

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
        """Send with retries on 429/5xx/timeouts (:func:`medibench.calls.send`); return the
        successful ``httpx.Response``. Every error message is redacted."""
        client, sem = self._client()
        policy = RetryPolicy(self.max_attempts, self.backoff, self.max_backoff)
        reply = await send(
            client, method, url, policy=policy, rng=self._jitter, slots=sem, **kwargs
        )
        resp = reply.response
        if reply.transient:
            problem = reply.problem
            if resp is not None:
                problem = f"HTTP {resp.status_code}: {excerpt(json_or_text(resp))}"
            raise APIError(
                redact(f"{self.name}: {problem} after {reply.attempts} attempts"),
                status=reply.status,
            )
        assert resp is not None  # send() returns a response unless retries ran out
        if resp.status_code >= 400:
            body = json_or_text(resp)
            reason = self._refusal(resp.status_code, body)
            if reason:
                raise ContentRefusedError(
                    redact(f"{self.name}: refused: {reason}"), status=resp.status_code
                )
            raise APIError(
                f"{self.name}: HTTP {resp.status_code}: {excerpt(body)}", status=resp.status_code
            )
        return resp

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """The wait before retry ``attempt`` (see :class:`medibench.calls.RetryPolicy`)."""
        policy = RetryPolicy(self.max_attempts, self.backoff, self.max_backoff)
        return policy.delay(attempt, retry_after, self._jitter)

    def _client(self):
        # The call layer's client and semaphore of the running event loop.
        return self._slots.get()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"


# -- images on the wire ---------------------------------------------------------------------
def encode_image(image: np.ndarray, image_format: str = "png") -> tuple[bytes, str]:
    """Encode an RGB uint8 image; returns the bytes and their MIME type."""
    import cv2

    from medibench.io import encode_image as encode

    ext = {"png": ".png", "jpeg": ".jpg", "webp": ".webp"}[image_format]
    params = (cv2.IMWRITE_JPEG_QUALITY, 95) if image_format == "jpeg" else ()
    return encode(image, ext, params=params, where="the request's image"), _MIME[image_format]


def decode_image(data: bytes, *, where: str = "answer") -> np.ndarray:
    """Decode PNG/JPEG/WebP bytes to uint8: ``(H, W)`` gray, ``(H, W, 3)`` RGB or RGBA.

    The mode is kept (an RGBA or gray answer is stored as such; the protocol converts it).
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as opened:
            opened.load()
            im: Image.Image = opened
            if im.mode not in ("L", "RGB", "RGBA"):
                has_alpha = "A" in im.getbands() or "transparency" in im.info
                im = im.convert("RGBA" if has_alpha else "RGB")
            return np.asarray(im, dtype=np.uint8).copy()
    except (UnidentifiedImageError, OSError) as exc:
        raise NoImageError(f"{where}: the answer's image cannot be decoded ({exc})") from None


def decode_b64(text: str, where: str) -> np.ndarray:
    """Decode a base64 image (a ``data:`` URL works too); see :func:`decode_image`."""
    if text.startswith("data:"):
        text = text.partition(",")[2]
    try:
        data = base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        raise NoImageError(f"{where}: the answer's image is not valid base64") from None
    return decode_image(data, where=where)


def multipart_body(
    fields: dict[str, str], file_field: str, filename: str, data: bytes, mime: str
) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body in one piece (httpx streams its own in many small writes,
    which costs its connection pool more CPU than the request is worth under concurrency)."""
    return multipart_files(fields, [(file_field, filename, data, mime)])


def multipart_files(
    fields: dict[str, str], uploads: list[tuple[str, str, bytes, str]]
) -> tuple[bytes, str]:
    """:func:`multipart_body` with several files, ``(field, filename, data, mime)`` each, in
    order (``image[]`` several times for the OpenAI edits of several images)."""
    boundary = os.urandom(16).hex()
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    for file_field, filename, data, mime in uploads:
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; '
            f'filename="{filename}"\r\nContent-Type: {mime}\r\n\r\n'
        )
        parts += [head.encode(), data, b"\r\n"]
    body = b"".join([*parts, f"--{boundary}--\r\n".encode()])
    return body, f"multipart/form-data; boundary={boundary}"


def to_base64(data: bytes) -> str:
    """``data`` as base64 text (:func:`medibench.calls.b64_text`)."""
    return b64_text(data)


# -- keys and answers -----------------------------------------------------------------------
def key_from_env(names: tuple[str, ...]) -> str:
    """The first of the environment variables ``names`` that is set; raises naming them all
    (:func:`medibench.calls.key_from_env`: the key is registered for redaction)."""
    return _key_from_env(names)


def json_or_text(resp) -> Any:
    """An ``httpx.Response``'s body: parsed JSON, or its text when it is not JSON."""
    try:
        return resp.json()
    except ValueError:
        return resp.text


def excerpt(body: Any) -> str:
    """An answer body as text for an error message, redacted and cut at :data:`EXCERPT_CHARS`."""
    text = redact(body if isinstance(body, str) else json.dumps(body)) or ""
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."
