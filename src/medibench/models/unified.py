"""Unified models: one transformers model that answers with text and makes images
(MedGEN-Bench's "unified models"), ``unified:PATH``.

MedGEN-Bench evaluates unified models beside its compositional systems; its official inference
code (``yangjj007/MedGEN-Bench-eval`` at 3450b8e: ``inference.py``, ``agent.py``) drives only
the compositional ones (a VLM, then an image API), so this adapter follows the model's own
library: transformers' Janus (``JanusForConditionalGeneration`` with ``JanusProcessor``:
Janus, Janus-Pro), the first unified family transformers ships with image generation.

For every sample, **text** comes from the text mode, as ``transformers-vlm:`` answers
(:class:`medibench.models.vlm.TransformersVLM`): the processor's chat template with every
input image (and the processor's default system prompt where the folder turns it on), greedy
decoding after ``torch.manual_seed(seed)``, stopping at every eos id of the generation config.

When the sample expects an **image** (MedGEN's generation and editing samples), the image mode
follows transformers' Janus example and the Janus-Pro generation config:

1. the image prompt (:data:`IMAGE_PROMPT`, option ``image_prompt``: ``{instruction}`` is the
   task's prompt, ``{answer}`` the text answer just made) in the chat template as a user turn,
   then the processor with ``generation_mode="image"`` (it appends ``<begin_of_image>``);
2. ``generate(generation_mode="image")``: classifier-free guidance against the same prompt with
   every token but BOS and ``<begin_of_image>`` replaced by the pad token, ``guidance_scale``
   (5: Janus-Pro's generation config and its paper's CFG weight); the vision config's
   ``num_image_tokens`` image tokens drawn at ``temperature`` (1, as Janus-Pro's generation
   config; 0 takes the most likely token) after ``torch.manual_seed(seed)``;
3. ``decode_image_tokens`` (the VQ-VAE decoder) and the processor's ``postprocess`` (undo the
   normalisation, x255, clip, truncate to uint8), given channels-first pixels: the PIL image
   processor (transformers without torchvision) misreads the channels-last tensors the example
   passes.

The image's size is the model's (the VQ grid times the decoder's upsampling: 384 px for
Janus-Pro); outputs are stored at that size and the protocols resize them.

Janus's image mode embeds the prompt's tokens only: the input image cannot condition the
generated image (an "edit" is a new image from text). The default image prompt therefore
carries the text answer, which saw the input image; ``image_prompt="{instruction}"`` gives the
task's prompt alone.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Unpack

import numpy as np

from medibench.models._base import _with_common
from medibench.models._hf_processor import UnsupportedModelError
from medibench.models.vlm import GeneratedAnswer, TextOptions, TransformersVLM

__all__ = ["IMAGE_PROMPT", "UNIFIED_FAMILIES", "UnifiedModel", "UnsupportedModelError"]

#: The default image prompt: the task's prompt, then the model's text answer.
IMAGE_PROMPT = "{instruction}\n{answer}"
#: Model types ``unified:`` runs, with the classes that carry them.
UNIFIED_FAMILIES = {"janus": "JanusForConditionalGeneration"}
_PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


class UnifiedModel:
    """A unified model saved at ``path`` (module docstring): text for every sample, and an
    image when one is wanted.

    Args:
        path: the ``save_pretrained`` folder (config, weights, processor with its tokenizer).
        name: the name recorded in runs (default: the folder name).
        max_new_tokens: the text answer's length limit.
        device: torch device; ``auto``: CUDA, then MPS, then CPU.
        max_images: the most images the text mode takes at once (``None``: any).
        eos_token_id: the text mode's stop id(s) (default: every stop id of the generation
            config).
        guidance_scale: the classifier-free guidance weight of the image mode (1: none).
        temperature: the image tokens' sampling temperature (0: the most likely token).
        image_prompt: the image mode's prompt, a template with ``{instruction}`` and/or
            ``{answer}``.

    Raises:
        FileNotFoundError: ``path`` has no ``config.json``.
        UnsupportedModelError: the folder's model makes no images, or not through Janus's
            image mode, or its processor or tokenizer is missing.
        ValueError: a bad option (the message names it).
    """

    spec_argument = "path"

    def __init__(
        self,
        path: str | Path,
        *,
        guidance_scale: float = 5.0,
        temperature: float = 1.0,
        image_prompt: str = IMAGE_PROMPT,
        **text: Unpack[TextOptions],
    ) -> None:
        from medibench.models._weights import transformers_folder

        if "{instruction}" not in image_prompt and "{answer}" not in image_prompt:
            raise ValueError(
                f"image_prompt {image_prompt!r} has neither {{instruction}} nor {{answer}}: "
                "the image would not depend on the sample"
            )
        if guidance_scale < 1:
            raise ValueError(
                f"guidance_scale must be at least 1 (1: no guidance), got {guidance_scale}"
            )
        if temperature < 0:
            raise ValueError(f"temperature must be 0 or more, got {temperature}")
        folder = transformers_folder(path, "unified model")
        check_unified_folder(folder)
        self.text = TransformersVLM(folder, **text)
        self.name, self.path, self.max_images = self.text.name, folder, self.text.max_images
        self.model, self.processor = self.text.model, self.text.processor
        self.guidance_scale, self.temperature = float(guidance_scale), float(temperature)
        self.image_prompt = image_prompt
        self._torch = self.text.vlm.torch
        self._tokens = _image_mode_tokens(self.model, self.processor, folder)

    @property
    def image_tokens(self) -> int:
        """The image tokens one image is made of (the vision config's ``num_image_tokens``)."""
        return int(self.model.config.vision_config.num_image_tokens)

    def generate(
        self, images: Sequence[np.ndarray], prompt: str, *, seed: int, want_image: bool
    ) -> GeneratedAnswer:
        """The text answer to ``prompt`` about ``images``, and an image when ``want_image``;
        both calls recorded (module docstring)."""
        text = self.text.answer(images, prompt, seed=seed)
        calls: list[dict[str, Any]] = [
            {"role": "text", "model": self.name, "prompt": prompt, "answer": text}
        ]
        if not want_image:
            return GeneratedAnswer(text, None, tuple(calls))
        image_prompt = self.image_prompt.replace("{instruction}", prompt).replace("{answer}", text)
        image = self.make_image(image_prompt, seed=seed)
        calls.append({
            "role": "image", "model": self.name, "prompt": image_prompt,
            "guidance_scale": self.guidance_scale, "temperature": self.temperature,
            "image_tokens": self.image_tokens, "output_shape": list(image.shape),
        })  # fmt: skip
        return GeneratedAnswer(text, image, tuple(calls))

    def make_image(self, prompt: str, *, seed: int) -> np.ndarray:
        """An image made from ``prompt`` alone by the image mode (steps 1-3 of the module
        docstring): ``(H, W, 3)`` uint8 RGB at the model's size."""
        torch = self._torch
        turn = self.text.vlm.chat_text([("user", 0, prompt)])
        enc = self.processor(text=[turn], generation_mode="image", return_tensors="pt")
        config = copy.deepcopy(self.model.generation_config)
        config.generation_kwargs = {"boi_token_id": self._tokens["boi"]}
        config.bos_token_id, config.pad_token_id = self._tokens["bos"], self._tokens["pad"]
        config.guidance_scale = self.guidance_scale
        config.do_sample = self.temperature > 0
        config.temperature = self.temperature if self.temperature > 0 else None
        torch.manual_seed(int(seed))
        with torch.inference_mode():
            tokens = self.model.generate(**enc.to(self.text.device), generation_config=config,
                                         generation_mode="image")  # fmt: skip
            pixels = self.model.decode_image_tokens(tokens)  # (1, H, W, 3), normalised
        chw = [p.permute(2, 0, 1).float().cpu() for p in pixels]
        out = self.processor.postprocess(chw, return_tensors="PIL.Image.Image")["pixel_values"]
        return np.asarray(out[0].convert("RGB"), dtype=np.uint8).copy()


#: the options ``medibench models`` lists and a model spec may set: the image mode's, then the
#: text mode's (:class:`TextOptions`) with :class:`TransformersVLM`'s defaults
UnifiedModel.__signature__ = _with_common(  # type: ignore[attr-defined]
    UnifiedModel.__init__, TransformersVLM.__init__, TextOptions
)


def check_unified_folder(folder: Path) -> str:
    """The model class ``folder``'s config names, checked to be one ``unified:`` runs, with a
    processor and a tokenizer saved beside it; :class:`UnsupportedModelError` naming the class
    found, or the missing file, and what is needed. Reads configs only (no weights)."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    model_type = str(config.get("model_type", "?"))
    found = _model_class(config)
    needed = ", ".join(f"{cls} ({t})" for t, cls in UNIFIED_FAMILIES.items())
    if model_type not in UNIFIED_FAMILIES:
        if _makes_images(found):
            what = "makes images, but not through Janus's image mode (the one medibench drives)"
        else:
            what = "makes no images"
        raise UnsupportedModelError(
            f"model {folder}: its config names {found} (model type '{model_type}'), which "
            f"{what}; unified: needs a model that answers with text and makes images: {needed}"
        )
    for kind, names in (("processor", _PROCESSOR_FILES), ("tokenizer", _TOKENIZER_FILES)):
        if not any((folder / n).is_file() for n in names):
            raise UnsupportedModelError(
                f"model {folder}: no {kind} saved beside the model ({' or '.join(names)} is "
                f"missing); unified: needs the {found}'s JanusProcessor with its tokenizer "
                "(processor.save_pretrained(PATH))"
            )
    return found


# -- helpers ----------------------------------------------------------------------------------
def _model_class(config: dict[str, Any]) -> str:
    """The class a ``config.json`` names: its ``architectures``, else the class transformers'
    auto mappings give its model type, else the model type itself."""
    named = config.get("architectures") or []
    if named:
        return str(named[0])
    model_type = str(config.get("model_type", "?"))
    try:
        from transformers.models.auto import modeling_auto as auto
    except ImportError:
        return model_type
    for mapping in (auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
                    auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, auto.MODEL_MAPPING_NAMES):  # fmt: skip
        cls = mapping.get(model_type)
        if isinstance(cls, str):
            return cls
    return model_type


def _makes_images(cls_name: str) -> bool:
    """Whether transformers' class ``cls_name`` declares image output."""
    try:
        import transformers

        cls = getattr(transformers, cls_name, None)
    except ImportError:
        return False
    return "image" in tuple(getattr(cls, "output_modalities", ()) or ())


def _image_mode_tokens(model: Any, processor: Any, folder: Path) -> dict[str, int]:
    """The ids the image mode needs: ``<begin_of_image>`` (the processor's image start token),
    BOS and pad (the generation config's, else the tokenizer's)."""
    if type(processor).__name__ != "JanusProcessor":
        raise UnsupportedModelError(
            f"model {folder}: its processor is {type(processor).__name__}; unified: needs the "
            "JanusProcessor the model was saved with"
        )
    tok, gen = processor.tokenizer, model.generation_config
    ids = {"boi": tok.convert_tokens_to_ids(processor.image_start_token)}
    for key, own in (("bos", tok.bos_token_id), ("pad", tok.pad_token_id)):
        value = getattr(gen, f"{key}_token_id", None)
        ids[key] = value if value is not None else own
    missing = [k for k, v in ids.items() if v is None or v == tok.unk_token_id]
    if missing:
        raise UnsupportedModelError(
            f"model {folder}: the image mode needs the {' and '.join(missing)} token id(s), "
            "which neither its generation config nor its tokenizer defines"
        )
    return {k: int(v) for k, v in ids.items()}
