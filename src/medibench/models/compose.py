"""Compositional systems: a VLM that plans, an image editor that carries the plan out.

``medibench run --model "openai-chat:gpt-4o + openai-image:gpt-image-1"`` builds a
:class:`CompositionalSystem` (MedGEN-Bench's "VLM & editor" systems, e.g. Qwen3-VL & GPT-image-1):

1. the VLM is shown the input image(s) and asked, in :data:`PLAN_PROMPT`, for a JSON object with
   ``output_text`` (its text answer) and ``edit_prompt`` (what the editor should do), as the
   official ``agent.py`` asks for them;
2. the editor (any :class:`~medibench.models.EditModel`) edits the first input image (the
   contact sheet of several, for one-image editors) with ``edit_prompt`` and the same seed.

Both calls are recorded, in order, in :attr:`GeneratedAnswer.calls`. In-context demonstrations
(``generate_with_examples``) go to the VLM as prior turns; the system takes them when its VLM
does (:attr:`CompositionalSystem.takes_examples`). When no image is wanted
(a VQA sample), only the VLM is asked, with the task's prompt as it is. A plan that is not a JSON
object with a non-empty ``edit_prompt`` is an :class:`~medibench.models.vlm.AnswerError` (a
failed prediction; the VLM's raw answer is quoted).

Spec: ``VLM + EDITOR``. ``VLM`` is ``openai-chat:MODEL``, ``transformers-vlm:PATH`` or
``module:callable``; ``EDITOR`` any editing-model spec (``openai-image:gpt-image-1``,
``ip2p:/weights``). Each part's options go in ``vlm_options`` / ``editor_options`` (mappings).
A part naming an unknown model is an :class:`~medibench.registry.UnknownNameError` that names the
part, the spec and the known names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from medibench.models._base import is_answering_model
from medibench.models.vlm import VLMS, AnswerError, CallableVLM, GeneratedAnswer, images_for
from medibench.registry import UnknownNameError, import_object

__all__ = [
    "PLAN_PROMPT",
    "CompositionalSystem",
    "as_answering_model",
    "is_answering_model",
    "load_vlm",
    "parse_plan",
]

#: What the VLM of a compositional system is asked (``{instruction}`` is the task's prompt).
PLAN_PROMPT = """You are a medical imaging assistant working with an image-editing model.
You are given a medical image and an instruction. Do two things:
1. Answer the instruction in text, from what the image shows.
2. Write a precise prompt telling the image-editing model how to change the input image so that
   it becomes the image the instruction asks for, keeping the anatomy and clinical content that
   should not change.

Instruction:
{instruction}

Reply with one JSON object and nothing else:
{{"output_text": "<your text answer>", "edit_prompt": "<the prompt for the image editor>"}}"""

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


class CompositionalSystem:
    """A VLM planning for an image editor (module docstring).

    Args:
        system: the spec, ``"VLM + EDITOR"``.
        name: the name recorded in runs (default: ``"<vlm name>+<editor name>"``).
        vlm_options, editor_options: keyword options of each part.
    """

    spec_argument = "system"

    def __init__(
        self,
        system: str,
        *,
        name: str | None = None,
        vlm_options: Mapping[str, Any] | None = None,
        editor_options: Mapping[str, Any] | None = None,
    ) -> None:
        vlm_text, editor_text = split_system(system)
        editor = _editor_spec(editor_text, editor_options or {}, system=system)  # names first
        self.vlm = load_vlm(vlm_text, vlm_options or {}, system=system)
        self.editor = editor.load()
        self.name = name or f"{self.vlm.name}+{self.editor.name}"
        self.system = system

    @property
    def concurrency(self) -> int:
        """The VLM's: calls in flight the runner may keep (1 when it does not say)."""
        return int(getattr(self.vlm, "concurrency", 1) or 1)

    @property
    def max_images(self) -> int | None:
        """The VLM's: the images one call may carry (``None``: any)."""
        return getattr(self.vlm, "max_images", None)

    @property
    def takes_examples(self) -> bool:
        """Whether the VLM takes in-context demonstrations (the system passes them to it)."""
        from medibench.models._examples import takes_examples

        return takes_examples(self.vlm)

    def generate(
        self, images: Sequence[np.ndarray], prompt: str, *, seed: int, want_image: bool
    ) -> GeneratedAnswer:
        return self.generate_with_examples(images, prompt, (), seed=seed, want_image=want_image)

    def generate_with_examples(
        self,
        images: Sequence[np.ndarray],
        prompt: str,
        examples: Sequence[Any],
        *,
        seed: int,
        want_image: bool,
    ) -> GeneratedAnswer:
        """:meth:`generate` with in-context ``examples`` passed to the VLM (as prior turns of
        its ``answer_with_examples``); the editor is asked as always."""
        shown = [ex.sample_id for ex in examples]

        def ask(question: str) -> tuple[str, dict[str, Any]]:
            if examples:
                text = self.vlm.answer_with_examples(images, question, examples, seed=seed)
            else:
                text = self.vlm.answer(images, question, seed=seed)
            call = _call("vlm", self.vlm.name, question, text)
            return text, ({**call, "examples": shown} if shown else call)

        if not want_image:
            text, call = ask(prompt)
            return GeneratedAnswer(text, None, (call,))
        plan_prompt = PLAN_PROMPT.format(instruction=prompt)
        raw, vlm_call = ask(plan_prompt)
        text, edit_prompt = parse_plan(raw, who=self.vlm.name)
        source = images_for(_OneImage, images)[0]
        image = self.editor.edit(source, edit_prompt, seed=seed)
        editor_call = {
            "role": "editor",
            "model": self.editor.name,
            "instruction": edit_prompt,
            "input_shape": list(source.shape),
            "output_shape": list(np.asarray(image).shape),
        }
        return GeneratedAnswer(text, np.asarray(image), (vlm_call, editor_call))

    def close(self) -> None:
        for part in (self.vlm, self.editor):
            closer = getattr(part, "close", None)
            if callable(closer):
                closer()


def split_system(system: str) -> tuple[str, str]:
    """``"VLM + EDITOR"`` -> ``(VLM, EDITOR)``; ``ValueError`` for another shape."""
    parts = [p.strip() for p in system.split("+")]
    if len(parts) != 2 or not all(parts):
        raise ValueError(
            f"compositional spec {system!r} must be 'VLM + EDITOR' "
            "(e.g. 'openai-chat:gpt-4o + openai-image:gpt-image-1')"
        )
    return parts[0], parts[1]


def parse_plan(raw: str, *, who: str = "the VLM") -> tuple[str, str]:
    """``(output_text, edit_prompt)`` from a VLM's plan (a JSON object, possibly fenced or with
    text around it); :class:`AnswerError` quoting the answer otherwise."""
    match = _JSON_OBJECT.search(raw.replace("```json", "").replace("```", ""))
    try:
        plan = json.loads(match.group(0)) if match else None
    except json.JSONDecodeError:
        plan = None
    edit = plan.get("edit_prompt") if isinstance(plan, dict) else None
    if not isinstance(edit, str) or not edit.strip():
        raise AnswerError(
            f"{who}'s plan is not a JSON object with a non-empty 'edit_prompt': {raw[:300]!r}"
        )
    text = plan.get("output_text") if isinstance(plan, dict) else None
    return (text if isinstance(text, str) else ""), edit.strip()


def load_vlm(text: str, options: Mapping[str, Any], *, system: str | None = None) -> Any:
    """The VLM named by ``text`` (``openai-chat:MODEL``, ``transformers-vlm:PATH``,
    ``module:callable``) built with ``options``."""
    head, sep, arg = text.partition(":")
    if head in VLMS:
        factory = VLMS.get(head)
        main = getattr(factory, "spec_argument", "model")
        return factory(**({main: arg} if sep else {}), **dict(options))
    if sep and all(part.isidentifier() for part in head.split(".")):  # module:callable
        try:
            target = import_object(text)
        except (ImportError, AttributeError, ValueError) as exc:
            raise UnknownNameError.of(
                "VLM", text, VLMS.names(), note=_in(system) + f" ({exc})"
            ) from None
        made = as_answering_model(target, dict(options), name=text)
        if not callable(getattr(made, "answer", None)):
            raise TypeError(f"{text!r}{_in(system)} is not a VLM (it has no answer method)")
        return made
    raise UnknownNameError.of("VLM", head, VLMS.names(), note=_in(system))


def as_answering_model(factory: Any, options: Mapping[str, Any], *, name: str) -> Any:
    """What a ``module:callable`` makes: the object a factory returns when it has ``answer`` or
    ``generate``; a plain function ``(images, prompt, *, seed) -> str`` as a VLM named ``name``."""
    if isinstance(factory, type) or options:
        made = factory(**dict(options))
        if is_answering_model(made):
            return made
        raise TypeError(f"{name} made {type(made).__name__}, which has no answer or generate")
    if is_answering_model(factory):
        return factory
    return CallableVLM(factory, name=name.rpartition(":")[2] or name)


# -- helpers ----------------------------------------------------------------------------------
#: Registered answering models (not editors).
_ANSWERING = frozenset({"openai-chat", "transformers-vlm", "unified", "compose"})


class _OneImage:
    max_images = 1


def _editor_spec(text: str, options: Mapping[str, Any], *, system: str) -> Any:
    from medibench.models import MODELS
    from medibench.models._spec import parse_model_spec

    spec = parse_model_spec(text, dict(options))
    try:
        spec.factory()
    except (UnknownNameError, ImportError, AttributeError, ValueError):
        head = text.partition(":")[0]
        known = [n for n in MODELS.names() if n not in _ANSWERING]
        raise UnknownNameError.of(
            "model", head, known, note=f"{_in(system)} (the editor part)"
        ) from None
    return spec


def _call(role: str, model: str, prompt: str, answer: str) -> dict[str, Any]:
    return {"role": role, "model": model, "prompt": prompt, "answer": answer}


def _in(system: str | None) -> str:
    return f" in compositional spec {system!r}" if system else ""
