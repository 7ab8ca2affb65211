"""Answering models: the :class:`VLM` and :class:`Generator` contracts, and their adapters.

A VLM answers with text::

    answer(images, prompt, *, seed) -> text

``images`` is a list of ``(H, W, 3)`` uint8 RGB arrays (one or more: multi-image VQA keeps
them all); a VLM that takes one image (``max_images = 1``) gets the official labelled contact
sheet of a longer list (:func:`contact_sheet`). A :class:`Generator` (a unified model, or a
compositional system of :mod:`medibench.models.compose`) answers with text and an image::

    generate(images, prompt, *, seed, want_image) -> GeneratedAnswer

Adapters (registered in :data:`VLMS`):

* ``openai-chat:MODEL``: any OpenAI-compatible ``/chat/completions`` endpoint through the judges'
  call layer (:class:`medibench.calls.ChatClient`: retries, bounded concurrency, redaction);
  images as PNG data URLs, temperature 0, the seed sent; the endpoint is ``base_url``, else
  ``$OPENAI_BASE_URL``, else the OpenAI API. A refusal or content filter raises
  :class:`~medibench.models.ContentRefusedError`; a failed call :class:`AnswerError`.
* ``transformers-vlm:PATH``: a transformers image-text-to-text model saved at ``PATH``
  (``save_pretrained`` folder), greedy decoding with ``torch.manual_seed(seed)``.
* ``module:callable``: a factory returning an object with ``answer`` or ``generate``, or a
  function ``(images, prompt, *, seed) -> str`` (see :func:`as_answering_model`).

Both adapters take in-context demonstrations (``answer_with_examples``) as prior chat turns
(:func:`medibench.models._examples.chat_examples`).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict, runtime_checkable

import numpy as np

from medibench.models._base import as_rgb_uint8
from medibench.models._errors import ContentRefusedError
from medibench.registry import Registry

__all__ = [
    "VLMS",
    "AnswerError",
    "CallableVLM",
    "GeneratedAnswer",
    "Generator",
    "OpenAIChatVLM",
    "TransformersVLM",
    "VLM",
    "contact_sheet",
    "images_for",
]

#: Height of the label band above each contact-sheet cell, and its colours (the official sheet).
SHEET_LABEL_HEIGHT = 44
_SHEET_BAND = (0x20, 0x20, 0x20)
_SHEET_FONTS = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    "/usr/share/fonts/truetype/liberation2/LiberationSans-Bold.ttf",
)


class AnswerError(RuntimeError):
    """A model could not answer (a failed call, an answer of the wrong shape); recorded as that
    sample's failed prediction."""


@runtime_checkable
class VLM(Protocol):
    """A vision-language model that answers with text.

    Attributes:
        name: the name recorded in runs.
    """

    name: str

    def answer(self, images: Sequence[np.ndarray], prompt: str, *, seed: int) -> str:
        """The text answer to ``prompt`` about ``images`` (uint8 RGB, in order)."""
        ...


@dataclass(frozen=True)
class GeneratedAnswer:
    """A text and image answer, with the calls that made it.

    Attributes:
        text: the text answer (may be empty: the runner records that as a failed prediction).
        image: the image answer (uint8), or ``None`` when none was asked for or made.
        calls: one record per component call, in order (``role``, ``model``, what it was asked
            and what it answered), stored with the prediction.
    """

    text: str
    image: np.ndarray | None = None
    calls: tuple[dict[str, Any], ...] = field(default=())


@runtime_checkable
class Generator(Protocol):
    """A model that answers with text and an image (a unified model or a compositional system)."""

    name: str

    def generate(
        self, images: Sequence[np.ndarray], prompt: str, *, seed: int, want_image: bool
    ) -> GeneratedAnswer:
        """Answer ``prompt`` about ``images``; with an image when ``want_image``."""
        ...


def contact_sheet(images: Sequence[np.ndarray], *, cell_size: int = 768) -> np.ndarray:
    """The official labelled contact sheet of several images (``prepare_medgen_tableiv.py``).

    Cells of ``cell_size`` squared, ``min(3, ceil(sqrt(n)))`` columns, row by row; each image
    shrunk to fit (PIL ``thumbnail``, LANCZOS, aspect kept; never enlarged) and centred below a
    44-pixel dark band (#202020) labelled ``Image i`` in white (DejaVu Sans Bold 24 when
    installed, else PIL's default font) at (14, 8); white background. Returns uint8 RGB.
    """
    from PIL import Image, ImageDraw, ImageFont

    if len(images) < 2:
        raise ValueError("a contact sheet is made of two or more images")
    if cell_size < 128:
        raise ValueError(f"cell_size must be at least 128, got {cell_size}")
    cells = []
    for image in images:
        im = Image.fromarray(as_rgb_uint8(image))
        im.thumbnail((cell_size, cell_size), Image.Resampling.LANCZOS)
        cells.append(im)
    columns = min(3, math.ceil(math.sqrt(len(cells))))
    rows = math.ceil(len(cells) / columns)
    step = cell_size + SHEET_LABEL_HEIGHT
    sheet = Image.new("RGB", (columns * cell_size, rows * step), "white")
    draw = ImageDraw.Draw(sheet)
    font: Any = None
    for candidate in _SHEET_FONTS:
        try:
            font = ImageFont.truetype(candidate, 24)
            break
        except OSError:
            continue
    font = font or ImageFont.load_default()
    for i, im in enumerate(cells):
        row, col = divmod(i, columns)
        x, y = col * cell_size, row * step
        draw.rectangle((x, y, x + cell_size - 1, y + SHEET_LABEL_HEIGHT - 1), fill=_SHEET_BAND)
        draw.text((x + 14, y + 8), f"Image {i + 1}", fill="white", font=font)
        offset = (
            x + (cell_size - im.width) // 2,
            y + SHEET_LABEL_HEIGHT + (cell_size - im.height) // 2,
        )
        sheet.paste(im, offset)
    return np.asarray(sheet, dtype=np.uint8).copy()


def images_for(model: Any, images: Sequence[np.ndarray]) -> list[np.ndarray]:
    """What ``model`` is shown: every image, or their contact sheet when it takes fewer
    (its ``max_images`` attribute; ``None`` or absent: any number)."""
    limit = getattr(model, "max_images", None)
    if limit is not None and len(images) > int(limit):
        return [contact_sheet(images)]
    return [as_rgb_uint8(im) for im in images]


class OpenAIChatVLM:
    """An OpenAI-compatible chat model as a VLM (module docstring).

    Args:
        model: the served model id (``gpt-4o``, ``Qwen/Qwen3-VL-8B-Instruct``).
        name: the name recorded in runs (default: the model id).
        base_url: the API root; ``None``: ``$OPENAI_BASE_URL``, else the OpenAI API.
        api_key_env: the variable holding the key; ``api_key_required=False`` for local servers.
        max_tokens, temperature, max_image_side, concurrency, max_attempts: as
            :class:`medibench.calls.ChatConfig`; ``timeout``: its ``timeout_s`` (seconds per
            request; the old option name ``timeout_s`` is still read).
        max_images: the most images one request may carry (``None``: any).
    """

    spec_argument = "model"

    @classmethod
    def resolve_options(
        cls, options: Mapping[str, Any], environ: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """``options`` as the model will use them: a ``base_url`` of ``None`` becomes the URL
        its calls go to (``$OPENAI_BASE_URL``, else the OpenAI API), as a run records it."""
        from medibench.calls import openai_base_url

        return {**options, "base_url": openai_base_url(options.get("base_url"), environ)}

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        api_key_required: bool = True,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        max_image_side: int = 2048,
        concurrency: int = 8,
        max_attempts: int = 5,
        timeout: float = 120.0,
        max_images: int | None = None,
    ) -> None:
        from medibench.calls import ChatConfig

        self.name = name or model
        self.max_images = max_images
        self.config = ChatConfig(
            model=model,
            base_url=base_url,
            api_key_env=api_key_env,
            api_key_required=api_key_required,
            max_tokens=max_tokens,
            temperature=temperature,
            max_image_side=max_image_side,
            concurrency=concurrency,
            max_attempts=max_attempts,
            timeout_s=timeout,
        )
        self.config.api_key()  # a missing key fails now, naming the variable
        self.concurrency = concurrency
        # One event loop and client per calling thread: the runner answers on several threads.
        self._local = threading.local()
        self._opened: list[tuple[asyncio.AbstractEventLoop, Any]] = []
        self._lock = threading.Lock()

    def answer(self, images: Sequence[np.ndarray], prompt: str, *, seed: int) -> str:
        """One chat call (blocking; thread-safe); see the class docstring."""
        return self.answer_with_examples(images, prompt, (), seed=seed)

    def answer_with_examples(
        self, images: Sequence[np.ndarray], prompt: str, examples: Sequence[Any], *, seed: int
    ) -> str:
        """:meth:`answer` after in-context ``examples`` (:class:`~medibench.models._examples.
        Demonstration`) as prior turns: a user turn (its images, its prompt) and an assistant
        turn (its answer) each."""
        if getattr(self._local, "loop", None) is None:
            from medibench.calls import ChatClient

            self._local.loop = asyncio.new_event_loop()
            self._local.client = ChatClient(self.config)
            with self._lock:
                self._opened.append((self._local.loop, self._local.client))
        return self._local.loop.run_until_complete(
            self._answer(self._local.client, images, prompt, seed, examples)
        )

    async def _answer(
        self,
        client: Any,
        images: Sequence[np.ndarray],
        prompt: str,
        seed: int,
        examples: Sequence[Any] = (),
    ) -> str:
        from medibench.calls import png_data_url
        from medibench.models._examples import chat_examples

        def content(shown: Sequence[np.ndarray], text: str) -> list[dict[str, Any]]:
            parts: list[dict[str, Any]] = []
            for image in images_for(self, shown):
                url, _ = png_data_url(image, max_side=self.config.max_image_side)
                parts.append({"type": "image_url", "image_url": {"url": url}})
            return [*parts, {"type": "text", "text": text}]

        messages: list[dict[str, Any]] = [
            {"role": role, "content": content(shown, text) if role == "user" else text}
            for role, shown, text in chat_examples(examples)
        ]
        messages.append({"role": "user", "content": content(images, prompt)})
        done = await client.complete(messages, seed=seed)
        if done.refused:
            raise ContentRefusedError(f"{self.name}: refused: {done.refused}")
        if done.text is None:
            raise AnswerError(f"{self.name}: {done.error or 'no answer'}")
        return done.text

    def close(self) -> None:
        """Close the HTTP clients and event loops of every thread that called."""
        with self._lock:
            opened, self._opened = self._opened, []
        for loop, client in opened:
            loop.run_until_complete(client.aclose())
            loop.close()
        self._local = threading.local()


class TransformersVLM:
    """A transformers image-text-to-text model saved at ``path`` (greedy decoding), through
    :class:`medibench.models._hf_vlm.LocalVLM`: the model's own prompt format, every stop id
    of its generation config, the processor's own batching.

    Args:
        path: the ``save_pretrained`` folder (``config.json``, weights, processor).
        name: the name recorded in runs (default: the folder name).
        max_new_tokens: the answer's length limit.
        device: torch device; ``auto``: CUDA, then MPS, then CPU (as the diffusers models).
        max_images: the most images the model takes at once (``None``: any).
        prompt: a template with ``{question}`` and ``{images}`` (the image placeholders)
            instead of the chat template (needed where the folder has none and medibench knows
            no format for its family).
        eos_token_id: stop id(s) (default: every stop id of the generation config).

    Raises:
        FileNotFoundError: ``path`` has no ``config.json`` (the message names the file).
        ImportError: torch or transformers is missing.
        UnsupportedModelError: not an image-text-to-text model, or no prompt format.
    """

    spec_argument = "path"

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        max_new_tokens: int = 512,
        device: str = "auto",
        max_images: int | None = None,
        prompt: str | None = None,
        eos_token_id: int | list[int] | None = None,
    ) -> None:
        from medibench.models._hf_vlm import LocalVLM

        self.vlm = LocalVLM(path, device=_device(device), prompt=prompt, eos_token_id=eos_token_id)
        self._torch = self.vlm.torch
        self.path = self.vlm.folder
        self.name = name or self.path.name
        self.max_images = max_images
        self.max_new_tokens = int(max_new_tokens)
        self.device = self.vlm.device
        self.processor = self.vlm.processor
        self.model = self.vlm.model

    def answer(self, images: Sequence[np.ndarray], prompt: str, *, seed: int) -> str:
        return self.answer_with_examples(images, prompt, (), seed=seed)

    def answer_with_examples(
        self, images: Sequence[np.ndarray], prompt: str, examples: Sequence[Any], *, seed: int
    ) -> str:
        """:meth:`answer` after in-context ``examples`` as prior chat turns (as
        :meth:`OpenAIChatVLM.answer_with_examples`), through the processor's chat template."""
        from medibench.models._examples import ExamplesNotSupportedError, chat_examples

        if examples and self.vlm.template is not None:
            raise ExamplesNotSupportedError(
                f"{self.name}: in-context examples are prior chat turns, and {self.path} has no "
                "chat template (its prompt is a single-turn format)"
            )
        turns = [*chat_examples(examples), ("user", list(images), prompt)]
        seen = [(role, images_for(self, pictures) if pictures else [], words)
                for role, pictures, words in turns]  # fmt: skip
        text = self.vlm.chat_text([(role, len(ims), words) for role, ims, words in seen])
        enc = self.vlm.encode([[im for _, ims, _ in seen for im in ims]], [text])
        self._torch.manual_seed(int(seed))
        seq = self.vlm.generate(enc, self.max_new_tokens)
        return self.vlm.decode(seq[0, enc["input_ids"].shape[1] :])


class TextOptions(TypedDict, total=False):
    """The options of :class:`TransformersVLM` a model answering through one passes on
    (``unified:``'s text mode)."""

    name: str | None
    max_new_tokens: int
    device: str
    max_images: int | None
    eos_token_id: int | list[int] | None


class CallableVLM:
    """A function ``(images, prompt, *, seed) -> str`` as a VLM."""

    def __init__(self, fn: Callable[..., str], *, name: str) -> None:
        self.fn = fn
        self.name = name

    def answer(self, images: Sequence[np.ndarray], prompt: str, *, seed: int) -> str:
        out = self.fn(images, prompt, seed=seed)
        if not isinstance(out, str):
            raise AnswerError(f"{self.name} returned {type(out).__name__}, not text")
        return out


#: VLM adapters by name (lazy): ``openai-chat:MODEL``, ``transformers-vlm:PATH``.
VLMS: Registry[VLM] = Registry("VLM")
VLMS.register(
    "openai-chat",
    "medibench.models.vlm:OpenAIChatVLM",
    help="OpenAI-compatible chat VLM: openai-chat:MODEL (base_url=..., key OPENAI_API_KEY).",
)
VLMS.register(
    "transformers-vlm",
    "medibench.models.vlm:TransformersVLM",
    help="A transformers image-text-to-text model saved locally: transformers-vlm:PATH.",
)


def _device(device: str) -> str:
    """``auto``: CUDA, then MPS, then CPU (as the diffusers models); any other value as given."""
    if device != "auto":
        return device
    from medibench.models._pipeline import _pick_device
    from medibench.models._weights import import_transformers

    torch, _ = import_transformers("a transformers VLM")  # missing: names the extra
    return _pick_device(torch, device)
