"""VLM answerers: ``answer(image, question) -> text``, batched.

* :class:`TransformersAnswerer`: a transformers vision-language model from a local folder
  (LLaVA-family first: ``AutoModelForImageTextToText`` and ``AutoProcessor``), greedy free
  generation with only the new tokens decoded; it also scores teacher-forced token accuracy
  and gives the editors their training loss.
* :class:`CallableAnswerer`: any ``module:callable`` (a function ``(image, question) -> str``
  or an object with ``answer``).
* :class:`OpenAIAnswerer`: an OpenAI-compatible chat endpoint through the call layer's one
  chat client (``medibench.calls.ChatClient``: retries, bounded concurrency, key redaction).

Every answerer keeps ``context``: facts written before each question, which is how in-context
editing edits a model it cannot train.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medibench.models._hf_vlm import LocalVLM

__all__ = [
    "Answerer",
    "AnswererError",
    "CallableAnswerer",
    "OpenAIAnswerer",
    "TransformersAnswerer",
    "load_answerer",
]

Item = tuple[np.ndarray, str]


class AnswererError(RuntimeError):
    """A model that cannot answer as asked (generation that does not continue the prompt, an
    answer that echoes the prompt, a failed endpoint call); the message names the model."""


class Answerer:
    """The interface: ``answer(image, question) -> str``; ``answer_batch`` for many."""

    name: str = "answerer"

    def __init__(self) -> None:
        self.context: list[str] = []
        self.edits: list[Any] = []  # the edit handles applied, in order (undo is last-in first)

    def question_text(self, question: str) -> str:
        """The question as sent: the in-context facts, then the question."""
        return " ".join([*self.context, question]) if self.context else question

    def answer(self, image: np.ndarray, question: str) -> str:
        return self.answer_batch([(image, question)])[0]

    def answer_batch(self, items: Sequence[Item]) -> list[str]:
        raise NotImplementedError


class TransformersAnswerer(Answerer):
    """A local transformers VLM (``path``: a folder written by ``save_pretrained``), through
    :class:`medibench.models._hf_vlm.LocalVLM` (the model's own prompt format, stop ids,
    processor-native batching and teacher forcing).

    Args:
        path: the model and processor folder.
        prompt: a template with ``{question}`` (default: the processor's chat template, else
            the family's own format; a folder with neither is an error naming this option).
        max_new_tokens: the longest answer, in tokens (greedy decoding).
        batch_size: questions per ``generate`` call (left padding).
        device: torch device.
        eos_token_id: stop id(s) (default: every stop id of the generation config).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        prompt: str | None = None,
        max_new_tokens: int = 16,
        batch_size: int = 8,
        device: str = "cpu",
        eos_token_id: int | list[int] | None = None,
    ) -> None:
        super().__init__()
        self.vlm = LocalVLM(path, device=device, prompt=prompt, eos_token_id=eos_token_id)
        self.torch = self.vlm.torch
        self.path = self.vlm.folder
        self.name = self.path.name
        self.processor = self.vlm.processor
        self.tokenizer = self.vlm.tokenizer
        self.tokenizer.padding_side = "left"
        self.device = device
        self.max_new_tokens = int(max_new_tokens)
        self.batch_size = int(batch_size)
        #: The prompt's length while a teacher-forced pass runs (codebook adapters read it).
        self.teacher_prompt_length: int | None = None

    @property
    def model(self) -> Any:
        """The transformers model (an editor may replace it: LoRA's merged copy)."""
        return self.vlm.model

    @model.setter
    def model(self, value: Any) -> None:
        self.vlm.model = value

    # -- prompts ----------------------------------------------------------------------------
    def prompt_text(self, question: str) -> str:
        return self.vlm.prompt_text(self.question_text(question))

    def encode(self, images: Sequence[np.ndarray], questions: Sequence[str]) -> Any:
        return self.vlm.encode([[im] for im in images], [self.prompt_text(q) for q in questions])

    # -- generation -------------------------------------------------------------------------
    def answer_batch(self, items: Sequence[Item]) -> list[str]:
        out: list[str] = []
        size = min(self.batch_size, self.vlm.max_batch or self.batch_size)
        for i in range(0, len(items), size):
            chunk = items[i : i + size]
            out.extend(self._generate([im for im, _ in chunk], [q for _, q in chunk]))
        return out

    def _generate(self, images: Sequence[np.ndarray], questions: Sequence[str]) -> list[str]:
        torch = self.torch
        enc = self.encode(images, questions)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        seq = self.vlm.generate(enc, self.max_new_tokens)
        n = ids.shape[1]
        if seq.ndim != 2 or seq.shape[1] < n or not torch.equal(seq[:, :n].to(ids.device), ids):
            raise AnswererError(
                f"model {self.path}: generate() did not return the prompt followed by new "
                "tokens (cannot tell the answer from the prompt)"
            )
        answers = []
        for row in range(seq.shape[0]):
            prompt = ids[row][mask[row].bool()]
            new = seq[row, n:]
            if new.shape[0] >= prompt.shape[0] and torch.equal(new[: prompt.shape[0]], prompt):
                raise AnswererError(
                    f"model {self.path}: the generation for {questions[row]!r} returned the "
                    "prompt tokens as its answer (a model or generation config that echoes "
                    "its input)"
                )
            answers.append(self.vlm.decode(new))
        return answers

    # -- teacher forcing --------------------------------------------------------------------
    def teacher_batch(self, image: np.ndarray, question: str, answer: str) -> tuple[Any, int]:
        """The model inputs for ``prompt + answer + end of turn`` with labels on exactly the
        answer's tokens and the end of turn, and the prompt's length in tokens."""
        return self.vlm.teacher_batch(image, self.prompt_text(question), answer)

    def token_accuracy(self, image: np.ndarray, question: str, answer: str, *,
                       with_eos: bool = False) -> float:  # fmt: skip
        """The fraction of the answer's tokens that are the model's argmax next token given the
        prompt and the answer's earlier tokens (EasyEdit's reliability reading)."""
        with self.torch.no_grad():
            return float(self.teacher_accuracy(*self.teacher_batch(image, question, answer),
                                               with_eos=with_eos))  # fmt: skip

    def teacher_accuracy(self, batch: Any, n: int, *, with_eos: bool = True) -> Any:
        logits = self.forward(batch, n).logits
        target = batch["labels"][0, n:]
        pred = logits[0, n - 1 : -1].argmax(-1)
        if not with_eos:  # the last label is the end of turn
            pred, target = pred[:-1], target[:-1]
        if target.numel() == 0:
            return self.torch.tensor(1.0)
        return (pred == target).float().mean()

    def forward(self, batch: Any, n: int) -> Any:
        """The model on a teacher-forced batch whose prompt is ``n`` tokens long."""
        self.teacher_prompt_length = n
        try:
            return self.model(**batch)
        finally:
            self.teacher_prompt_length = None


class CallableAnswerer(Answerer):
    """``fn(image, question) -> str`` (or ``obj.answer``) as an answerer."""

    def __init__(self, fn: Callable[[np.ndarray, str], str] | Any, name: str = "callable") -> None:
        super().__init__()
        self.fn = fn.answer if hasattr(fn, "answer") else fn
        self.name = name

    def answer_batch(self, items: Sequence[Item]) -> list[str]:
        out = []
        for image, q in items:
            text = self.fn(image, self.question_text(q))
            if not isinstance(text, str):
                raise AnswererError(f"{self.name} returned {type(text).__name__}, not text")
            out.append(text.strip())
        return out


class OpenAIAnswerer(Answerer):
    """An OpenAI-compatible chat model (``base_url`` ``None``: the OpenAI API), key from
    ``api_key_env``; temperature 0.

    Once one call has used up its retries (HTTP 5xx, 429, a timeout: the call layer's backoff
    after each attempt), every later call of this answerer is tried once: an endpoint that
    keeps failing a kind of question is not waited out again call after call (an edit run asks
    each of its questions at least twice)."""

    def __init__(self, model: str, *, base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", api_key_required: bool = True,
                 max_tokens: int = 64, concurrency: int = 8) -> None:  # fmt: skip
        super().__init__()
        from medibench.calls import ChatConfig

        self.name = model
        self.config = ChatConfig(model=model, base_url=base_url, api_key_env=api_key_env,
                                  api_key_required=api_key_required, max_tokens=max_tokens,
                                  concurrency=concurrency)  # fmt: skip
        self.retries_spent: str | None = None  # the failure that used up a call's retries

    def answer_batch(self, items: Sequence[Item]) -> list[str]:
        return asyncio.run(self._all(items))

    async def _all(self, items: Sequence[Item]) -> list[str]:
        from medibench.calls import ChatClient, png_data_url

        config, once = self.config, self.retries_spent is not None
        if once:
            config = config.model_copy(update={"max_attempts": 1})
        client = ChatClient(config)
        try:

            async def one(image: np.ndarray, q: str) -> str:
                url, _ = png_data_url(image, max_side=self.config.max_image_side)
                content = [{"type": "text", "text": self.question_text(q)},
                           {"type": "image_url", "image_url": {"url": url}}]  # fmt: skip
                done = await client.complete([{"role": "user", "content": content}],
                                             seed=self.config.seed)  # fmt: skip
                if done.text is None:
                    raise AnswererError(
                        f"{self.name}: {done.error or done.refused}{self._note(done, once)}"
                    )
                return done.text.strip()

            return list(await asyncio.gather(*(one(im, q) for im, q in items)))
        finally:
            await client.aclose()

    def _note(self, done: Any, once: bool) -> str:
        """Remember a call that used up its retries; say so on a call tried ``once`` since."""
        if once:
            return f" (tried once: an earlier call used up its retries on {self.retries_spent})"
        if self.config.max_attempts > 1 and done.attempts >= self.config.max_attempts:
            self.retries_spent = done.failure or "a failure"
        return ""


def load_answerer(spec: str, **options: Any) -> Answerer:
    """An answerer from a spec: a local model folder, ``openai:MODEL`` (options ``base_url``,
    ``api_key_env``, ...) or ``module:callable``."""
    if spec.startswith("openai:"):
        return OpenAIAnswerer(spec.split(":", 1)[1], **options)
    if Path(spec).is_dir():
        return TransformersAnswerer(spec, **options)
    if ":" in spec:
        from medibench.registry import import_object

        obj = import_object(spec)
        return CallableAnswerer(obj() if isinstance(obj, type) else obj, name=spec)
    raise FileNotFoundError(f"model {spec!r}: not a model folder, openai:MODEL or module:callable")
