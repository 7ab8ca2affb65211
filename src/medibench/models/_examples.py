"""In-context demonstrations: an input of the model contract, not a family of models.

A model that can learn from worked examples declares one more method beside its usual one:

* an editor: ``edit_with_examples(image, instruction, examples, *, seed) -> image``;
* a VLM: ``answer_with_examples(images, prompt, examples, *, seed) -> str``;
* a generator (a compositional system): ``generate_with_examples(images, prompt, examples, *,
  seed, want_image) -> GeneratedAnswer``.

``examples`` is a sequence of :class:`Demonstration` (in the order they are to be shown); an empty
sequence must give what the plain method gives. A model without the method cannot take examples
(a diffusers pipeline): a run that asks for them refuses it before anything runs
(:func:`check_takes_examples`).

The text sent around the images comes from a versioned template file,
``models/templates/icl@<version>.yaml`` (:func:`load_template`); runs store its name and sha256.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

import numpy as np

__all__ = [
    "EXAMPLE_METHODS",
    "Demonstration",
    "ExamplesNotSupportedError",
    "IclTemplate",
    "chat_examples",
    "check_takes_examples",
    "gemini_turns",
    "load_template",
    "openai_image_prompt",
    "takes_examples",
]

#: The method a model declares to take examples, by what it does (its plain method).
EXAMPLE_METHODS = {
    "edit": "edit_with_examples",
    "answer": "answer_with_examples",
    "generate": "generate_with_examples",
}
#: The template version runs use.
TEMPLATE_VERSION = "1"


@dataclass(frozen=True)
class Demonstration:
    """One worked example shown to a model before its query.

    Attributes:
        sample_id: the pool sample it comes from.
        images: its input image(s), uint8 RGB ``(H, W, 3)``, in order (editors use the first).
        instruction: its instruction (for answering models: the prompt it was asked).
        output: the edited image it should have become (uint8 RGB; editors), or ``None``.
        answer: its expected text answer (answering models), or ``None``.
    """

    sample_id: str
    images: tuple[np.ndarray, ...]
    instruction: str
    output: np.ndarray | None = None
    answer: str | None = None

    @property
    def input(self) -> np.ndarray:
        """The first input image."""
        return self.images[0]


class ExamplesNotSupportedError(ValueError):
    """A run asked for demonstrations and the model has no method that takes them."""


def takes_examples(model: Any) -> bool:
    """Whether ``model`` (an object or its class) declares a method taking examples for what it
    does: ``edit_with_examples`` beside ``edit``, and so on (:data:`EXAMPLE_METHODS`). A model
    may say so itself with a boolean ``takes_examples`` attribute (a compositional system: its
    VLM's answer)."""
    declared = getattr(model, "takes_examples", None)
    if isinstance(declared, bool):
        return declared
    return any(
        callable(getattr(model, plain, None)) and callable(getattr(model, with_examples, None))
        for plain, with_examples in EXAMPLE_METHODS.items()
    )


def check_takes_examples(model: Any, name: str) -> None:
    """Raise :class:`ExamplesNotSupportedError` naming ``name`` unless it takes examples."""
    if takes_examples(model):
        return
    kind = type(model).__name__ if not isinstance(model, type) else model.__name__
    raise ExamplesNotSupportedError(
        f"model {name!r} ({kind}) cannot take in-context demonstrations (--icl-k above 0): it "
        "has no edit_with_examples (editors), answer_with_examples (VLMs) or "
        "generate_with_examples method. Use --icl-k 0, or a model that takes examples "
        "(openai-image, gemini-image, openai-chat, transformers-vlm, 'VLM + EDITOR'); "
        "docs/models.md says how a module:callable model declares one"
    )


@dataclass(frozen=True)
class IclTemplate:
    """The texts of one template file: ``name`` (``icl@1``), its ``sha256``, and ``texts``."""

    name: str
    sha256: str
    texts: dict[str, str]

    def text(self, key: str, **values: Any) -> str:
        """The text ``key`` with ``{placeholders}`` filled in."""
        return self.texts[key].format(**values)


@cache
def load_template(version: str = TEMPLATE_VERSION) -> IclTemplate:
    """The template file ``icl@<version>.yaml`` of the package (``FileNotFoundError`` naming
    it when there is no such version)."""
    import yaml

    name = f"icl@{version}"
    path = files("medibench.models") / "templates" / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no in-context template {name!r} ({path})")
    data = path.read_bytes()
    texts = yaml.safe_load(data.decode("utf-8"))
    return IclTemplate(
        name, hashlib.sha256(data).hexdigest(), {k: str(v) for k, v in texts.items()}
    )


def openai_image_prompt(examples: Sequence[Demonstration], instruction: str) -> str:
    """The one prompt of an OpenAI edit with examples: the images are sent as ``image[]`` in
    the order example 1 input, example 1 output, ..., the query (the last), and the prompt says
    which is which. Without examples it is ``instruction`` itself."""
    if not examples:
        return instruction
    tpl = load_template()
    lines = [
        tpl.text(
            "openai_image_example",
            i=i + 1,
            input_index=2 * i + 1,
            output_index=2 * i + 2,
            instruction=ex.instruction,
        )
        for i, ex in enumerate(examples)
    ]
    n = 2 * len(examples)
    return tpl.text(
        "openai_image",
        n_images=n + 1,
        n_example_images=n,
        k=len(examples),
        examples="\n".join(lines),
        query_index=n + 1,
        instruction=instruction,
    )


def gemini_turns(
    examples: Sequence[tuple[str, dict[str, Any], dict[str, Any]]],
    instruction: str,
    query_image: dict[str, Any],
) -> list[dict[str, Any]]:
    """Gemini ``contents``: per example a user turn (its text, its input image part) and a model
    turn (its output image part), then the query's user turn, as a request without examples
    sends it. ``examples`` are ``(instruction, input part, output part)``; the first user turn
    starts with the template's introduction."""
    tpl = load_template()
    contents: list[dict[str, Any]] = []
    for i, (text, input_part, output_part) in enumerate(examples):
        parts: list[dict[str, Any]] = []
        if i == 0:
            parts.append({"text": tpl.text("gemini_intro", k=len(examples))})
        parts += [{"text": tpl.text("gemini_example", instruction=text)}, input_part]
        contents.append({"role": "user", "parts": parts})
        contents.append({"role": "model", "parts": [output_part]})
    query = [{"text": tpl.text("gemini_query", instruction=instruction)}, query_image]
    contents.append({"role": "user", "parts": query})
    return contents


def chat_examples(examples: Sequence[Demonstration]) -> list[tuple[str, list[np.ndarray], str]]:
    """Prior chat turns: ``(role, images, text)`` per turn, a user turn (the example's images and
    prompt) then an assistant turn (its answer, no images) per example."""
    tpl = load_template()
    turns: list[tuple[str, list[np.ndarray], str]] = []
    for ex in examples:
        if ex.answer is None:
            raise ValueError(f"demonstration {ex.sample_id!r} has no answer text to show")
        turns.append(("user", list(ex.images), tpl.text("chat_user", prompt=ex.instruction)))
        turns.append(("assistant", [], tpl.text("chat_assistant", answer=ex.answer)))
    return turns
