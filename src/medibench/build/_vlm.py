"""The VLM verifier of inpaintings (``verify:`` of SOURCE.yaml), as MieDB-100k's construction
rejects failed fills with a vision-language model (Qwen3-VL-32B-Instruct) judging a collage.

A fill the build's ``--verifier`` accepted is shown to the model as one image, three labelled
panels side by side (:func:`medibench.judges.collage`): ``ORIGINAL`` (the slice with its
lesion) | ``MASKED`` (the region to replace painted white, as the inpainter was given it) |
``INPAINTED`` (the fill after the background restore), with the question of the prompt file
``build_inpainting_check_v1.md`` (medibench's own: the paper's is unpublished). The answer is
read all or nothing: one JSON object ``{"verdict": "accept" | "reject", "reason": "..."}``;
anything else is an error naming the samples the fill would make, never an accept. A model
that refuses to answer rejects the fill (``reason`` says so).

The verdict's ``details`` keep the model, endpoint, prompt file and version, seed, cache key and
the model's full answer; the attempt log and the accepted samples' metadata store them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from medibench.build._calls import ChatStep, ModelCall, strict_json
from medibench.build._verify import Verdict

__all__ = ["PROMPT", "VLMVerifier", "parse_check"]

PROMPT = "build_inpainting_check_v1.md"
PANELS = ("ORIGINAL", "MASKED", "INPAINTED")


def parse_check(text: str | None) -> tuple[bool, str]:
    """``(accepted, reason)`` of an answer, or :class:`ValueError` saying what is wrong.

    >>> parse_check('{"verdict": "reject", "reason": "The lesion is still visible."}')
    (False, 'The lesion is still visible.')
    """
    data = strict_json(text, ("verdict", "reason"))
    verdict, reason = data["verdict"], data["reason"]
    if not isinstance(verdict, str) or verdict.strip().lower() not in ("accept", "reject"):
        raise ValueError(f'\'verdict\' must be "accept" or "reject", got {verdict!r}')
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(f"'reason' must be a non-empty string, got {reason!r}")
    return verdict.strip().lower() == "accept", reason.strip()


class VLMVerifier:
    """The VLM check of one build folder (module docstring); ``made``/``cached`` count calls."""

    name = "vlm"

    def __init__(self, call: ModelCall, folder: Path) -> None:
        self.step = ChatStep("verify", call, PROMPT, folder / ".build" / "calls")

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, **self.step.provenance()}

    def check(
        self, original: np.ndarray, edited: np.ndarray, region: np.ndarray,
        context: dict[str, Any], where: str,
    ) -> Verdict:  # fmt: skip
        """Ask about one fill. ``context``: ``lesion``, ``modality``, ``region`` (the anatomy);
        ``where`` names the samples for errors.

        Raises:
            BuildError: the answer failed or did not parse (naming ``where``).
            CallFailed: the endpoint cannot answer.
        """
        from medibench.calls import png_data_url
        from medibench.judges._images import collage

        masked = original.copy()
        masked[region] = 255
        board = collage([original, masked, edited], list(PANELS))
        cfg = self.step.config
        url, note = png_data_url(board, max_side=cfg.max_image_side, what="collage")
        fields = {"lesion": context["lesion"], "modality": context["modality"],
                  "region": context.get("region") or "body"}  # fmt: skip
        question = self.step.prompt.render("question", **fields)
        digest = hashlib.sha256(np.ascontiguousarray(board).tobytes()).hexdigest()
        key = self.step.key({"collage_sha256": digest, "shape": list(board.shape), **fields})
        messages = [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": question},
        ]}]  # fmt: skip
        [((accepted, reason), record)] = self.step.ask([(key, messages, where)], _read_answer)
        details = {**record, "verdict": "accept" if accepted else "reject", "reason": reason,
                   "collage_sha256": digest, "note": note}  # fmt: skip
        return Verdict(accepted, f"vlm: {reason}", {}, details)


def _read_answer(text: str | None, refused: str | None, _index: int) -> tuple[bool, str]:
    """A refusal is no accept: the fill is rejected (and retried with another seed)."""
    return (False, f"refused: {refused}") if refused else parse_check(text)
