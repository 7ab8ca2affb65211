"""A local transformers image-text-to-text model as medibench answers with it (shared by
``transformers-vlm:`` and the model-editing answerers).

What a user relies on, for every family transformers ships under ``AutoModelForImageTextToText``:

* the prompt is the model's own: its processor's chat template; where there is none, the
  family's known format (PaliGemma: ``<image>`` per image then ``answer en {question}``, the
  processor adding ``<bos>`` and the newline; LLaVA: ``USER: <image>\\n{question} ASSISTANT:``);
  otherwise an error naming the ``prompt`` option;
* images go to the processor as one list per prompt (its native batching);
* generation stops at any of the generation config's stop ids (Gemma 3's ``<end_of_turn>``,
  Qwen's ``<|im_end|>``, ...), unless the user sets ``eos_token_id``;
* a tokenizer without a pad token pads with the generation config's pad id, else its eos;
* teacher forcing is built by the processor from the prompt and the answer (so every per-token
  tensor: ``token_type_ids``, ``mm_token_type_ids``, Mllama's ``cross_attention_mask``, covers
  the answer), the answer closed by the token that ends the model's turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from medibench.models._hf_processor import UnsupportedModelError, load_processor
from medibench.models._weights import import_transformers, transformers_folder

__all__ = ["LLAVA_PROMPT", "PALIGEMMA_PROMPT", "LocalVLM", "UnsupportedModelError"]

#: LLaVA-1.5's conversation format, for LLaVA folders without a chat template.
LLAVA_PROMPT = "USER: {images}{question} ASSISTANT:"
#: PaliGemma's VQA prefix (big_vision); the processor adds ``<bos>`` and the closing newline.
PALIGEMMA_PROMPT = "{images}answer en {question}"
_OWN_FORMATS = {"llava": (LLAVA_PROMPT, "<image>\n"), "paligemma": (PALIGEMMA_PROMPT, None)}


class LocalVLM:
    """A transformers VLM loaded from ``path`` (module docstring).

    Args:
        path: the ``save_pretrained`` folder (config, weights, processor, tokenizer).
        device: torch device.
        prompt: a prompt template with ``{question}`` (and ``{images}``: the image
            placeholders, one per image) replacing the chat template / family format.
        eos_token_id: the stop id(s); ``None``: every stop id of the generation config.
        what: what is being loaded, for error messages.
    """

    def __init__(self, path: Any, *, device: str = "cpu", prompt: str | None = None,
                 eos_token_id: int | Sequence[int] | None = None,
                 what: str = "a transformers VLM") -> None:  # fmt: skip
        self.folder = transformers_folder(path, "transformers VLM")
        self.torch, transformers = import_transformers(what)
        config = transformers.AutoConfig.from_pretrained(self.folder)
        self.model_type = str(getattr(config, "model_type", "?"))
        if type(config) not in transformers.AutoModelForImageTextToText._model_mapping:
            raise UnsupportedModelError(
                f"model {self.folder}: model type '{self.model_type}' is not an image-text-to-"
                "text model in this transformers (AutoModelForImageTextToText has no class "
                "for it), so medibench cannot answer with it"
            )
        self.processor = load_processor(self.folder)
        self.tokenizer = self.processor.tokenizer
        model = transformers.AutoModelForImageTextToText.from_pretrained(self.folder)
        self.model = model.to(device).eval()
        self.device = device
        self.stop_ids = _stop_ids(self.model, self.tokenizer, eos_token_id)
        if self.tokenizer.pad_token_id is None:  # pad with the generation config's pad, or eos
            pad = getattr(self.model.generation_config, "pad_token_id", None)
            pad = pad if pad is not None else self.stop_ids[0]
            self.tokenizer.pad_token = self.tokenizer.convert_ids_to_tokens(int(pad))
        self.template = prompt
        if prompt is None and not getattr(self.processor, "chat_template", None):
            if self.model_type not in _OWN_FORMATS:
                raise UnsupportedModelError(
                    f"model {self.folder}: its processor has no chat template and medibench "
                    f"knows no prompt format for model type '{self.model_type}': set one with "
                    "the prompt option (a template with {question}, and {images} where the "
                    "image placeholders go)"
                )
            self.template = _OWN_FORMATS[self.model_type][0]
        self.end_id = _turn_end(self.stop_ids, self.tokenizer, self.processor)
        #: Prompts per ``generate`` call at most (``None``: any). Mllama's cross-attention mask
        #: loses step with its cache once one row of a batch decodes past another (transformers
        #: 5.24: a shape error), so it answers one prompt at a time.
        self.max_batch: int | None = 1 if self.model_type == "mllama" else None

    # -- prompts ------------------------------------------------------------------------------
    def prompt_text(self, question: str, n_images: int = 1) -> str:
        """The prompt for ``question`` about ``n_images`` images, up to the answer."""
        return self.chat_text([("user", n_images, question)])

    def chat_text(self, turns: Sequence[tuple[str, int, str]]) -> str:
        """The prompt for a conversation of ``(role, number of images, text)`` turns ending
        with the user's, up to the answer. A prompt template (the ``prompt`` option, the
        family's own format) takes one user turn only."""
        if self.template is not None:
            if len(turns) != 1 or turns[0][0] != "user":
                raise UnsupportedModelError(
                    f"model {self.folder}: its prompt template takes one question, not a "
                    "conversation (it has no chat template)"
                )
            _, n_images, question = turns[0]
            own = _OWN_FORMATS.get(self.model_type, (None, None))[1]
            image = own if own is not None else str(getattr(self.processor, "image_token", ""))
            return self.template.replace("{images}", image * n_images).replace(
                "{question}", question
            )
        messages = []
        for role, n_images, text in turns:
            content: list[dict[str, Any]] = [{"type": "image"} for _ in range(n_images)]
            content.append({"type": "text", "text": text})
            messages.append({"role": role, "content": content})
        return str(self.processor.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        ))  # fmt: skip

    def encode(self, images: Sequence[Sequence[np.ndarray]], texts: Sequence[str],
               **kwargs: Any) -> Any:  # fmt: skip
        """The processor's batch for ``texts``, ``images[i]`` being text ``i``'s images (one
        list per prompt: the processors' own batching), on the model's device."""
        from PIL import Image

        nested = [[Image.fromarray(np.ascontiguousarray(im)) for im in ims] for ims in images]
        enc = self.processor(images=nested, text=list(texts), return_tensors="pt", padding=True,
                             **kwargs)  # fmt: skip
        return enc.to(self.device)

    # -- generation ---------------------------------------------------------------------------
    def generate(self, enc: Any, max_new_tokens: int) -> Any:
        """Greedy ``generate`` on a batch from :meth:`encode`, stopping at :attr:`stop_ids`:
        the sequences, prompt included (``(batch, length)`` token ids)."""
        with self.torch.inference_mode():
            return self.model.generate(
                **enc, max_new_tokens=int(max_new_tokens), do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id, eos_token_id=self.stop_ids,
            )  # fmt: skip

    def decode(self, new_tokens: Any) -> str:
        """The answer text of generated token ids (special tokens and stop ids dropped)."""
        ids = [int(t) for t in new_tokens]
        for i, t in enumerate(ids):
            if t in self.stop_ids:
                ids = ids[:i]
                break
        return str(self.tokenizer.decode(ids, skip_special_tokens=True)).strip()

    # -- teacher forcing ----------------------------------------------------------------------
    def teacher_batch(self, image: np.ndarray, prompt: str, answer: str) -> tuple[Any, int]:
        """The processor's batch for ``prompt`` followed by ``answer`` and the token that ends
        the model's turn, with ``labels`` on exactly those answer tokens (``-100`` elsewhere),
        and the prompt's length in tokens."""
        torch = self.torch
        answer = answer.strip()
        if self.model_type == "paligemma":  # its processor builds prefix + suffix + <eos>
            batch = dict(self.encode([[image]], [prompt], suffix=[answer]))
            n = int((batch["labels"][0] == -100).sum())
        else:
            n = int(self.encode([[image]], [prompt])["input_ids"].shape[1])
            sep = "" if not prompt or prompt[-1].isspace() else " "
            end = self.tokenizer.convert_ids_to_tokens(self.end_id)
            batch = dict(self.encode([[image]], [f"{prompt}{sep}{answer}{end}"]))
            prompt_ids = self.encode([[image]], [prompt])["input_ids"][0]
            if not torch.equal(batch["input_ids"][0, :n], prompt_ids):
                raise UnsupportedModelError(
                    f"model {self.folder}: the prompt's tokens change when the answer follows "
                    "it, so the answer's tokens cannot be told apart for teacher forcing"
                )
            labels = batch["input_ids"].clone()
            labels[:, :n] = -100
            batch["labels"] = labels
        return batch, n


def _stop_ids(model: Any, tokenizer: Any, chosen: int | Sequence[int] | None) -> list[int]:
    """The user's stop id(s), else every eos id of the generation config, else the
    tokenizer's eos."""
    if chosen is None:
        chosen = getattr(model.generation_config, "eos_token_id", None)
    if chosen is None:
        chosen = tokenizer.eos_token_id
    if chosen is None:
        raise UnsupportedModelError("the model has no stop token: set eos_token_id")
    ids = [int(chosen)] if isinstance(chosen, int) else [int(i) for i in chosen]
    return list(dict.fromkeys(ids))


def _turn_end(stop_ids: list[int], tokenizer: Any, processor: Any) -> int:
    """The stop id that closes an answer: the one the chat template writes (``<end_of_turn>``,
    ``<|im_end|>``), else the tokenizer's eos when it stops, else the first stop id."""
    template = str(getattr(processor, "chat_template", None) or "")
    for i in stop_ids:
        token = tokenizer.convert_ids_to_tokens(i)
        if token and token in template:
            return i
    eos = tokenizer.eos_token_id
    return int(eos) if eos in stop_ids else stop_ids[0]

