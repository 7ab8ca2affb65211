"""Cross-attention capture from diffusers pipelines (extra ``medibench[torch]``).

:func:`record_cross_attention` runs one edit with a recording processor on every cross-attention
layer of the pipeline's denoiser (a UNet or a transformer whose cross-attention layers are
diffusers ``Attention`` modules with the plain ``AttnProcessor`` or ``AttnProcessor2_0``). The
layer's own processor still computes its output, so the edited image is byte-identical with and
without capture; the recorder recomputes the attention probabilities ``softmax(QK^T * scale)``
beside it (as ``AttnProcessor`` does) for the chosen guidance chunk only and keeps, per layer and
head, their sum over steps for the chosen tokens (every step too with ``keep_steps``).

:func:`capture_attention` turns that into one heat map for a word of the instruction. Every choice
the public tools disagree on is an option of :class:`AttentionOptions`, MedEBench's reading the
default (``AttentionOptions.preset("medebench" | "daam" | "p2p")``):

- ``chunk``: which classifier-free-guidance chunk of the batch. InstructPix2Pix runs three
  (text-and-image conditioned, image-only, unconditional), a plain Stable Diffusion two
  (unconditional, conditional); ``"conditional"`` is the text-conditioned one of either.
- ``layers`` (``down``, ``mid``, ``up`` blocks) and ``max_side`` (keep maps at most that many
  latent pixels on a side; prompt-to-prompt's store keeps maps up to 32x32 and shows the 16x16
  ones of the down and up blocks).
- ``steps``: ``mean`` over diffusion steps (MedEBench, prompt-to-prompt) or ``sum`` (DAAM).
- heads are averaged; each layer's map is resized to the mask size (``upsample``: bilinear, or
  bicubic as DAAM), in (H, W) order for non-square images, and layers are averaged.
- ``token_merge``: a word split into sub-word tokens gets the ``mean`` (or ``sum``) of their maps.

The map is then min-max normalised (:func:`medibench.analysis.normalize_heatmap`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from medibench.analysis._recorder import (
    CrossAttentionRecord,
    NoCrossAttentionError,
    latent_grid,
    record_cross_attention,
)
from medibench.analysis._tokens import Occurrence, TokenChoice, select_word
from medibench.analysis.grounding import normalize_heatmap

__all__ = [
    "AttentionMaps",
    "AttentionOptions",
    "CrossAttentionRecord",
    "NoCrossAttentionError",
    "capture_attention",
    "heatmap_from_record",
    "latent_grid",
    "record_cross_attention",
]

Block = Literal["down", "mid", "up"]


@dataclass(frozen=True)
class AttentionOptions:
    """How cross-attention maps become one heat map (defaults: MedEBench's reading, all layers
    and steps averaged). See the module docstring for each option."""

    chunk: int | Literal["conditional"] = "conditional"
    layers: tuple[Block, ...] = ("down", "mid", "up")
    max_side: int | None = None
    steps: Literal["mean", "sum"] = "mean"
    upsample: Literal["bilinear", "bicubic"] = "bilinear"
    token_merge: Literal["mean", "sum"] = "mean"
    occurrence: Occurrence = "first"

    def __post_init__(self) -> None:
        bad = [b for b in self.layers if b not in ("down", "mid", "up")]
        if bad or not self.layers:
            raise ValueError(f"layers must be a non-empty subset of down, mid, up; got {bad}")
        for name, allowed in (
            ("steps", ("mean", "sum")),
            ("upsample", ("bilinear", "bicubic")),
            ("token_merge", ("mean", "sum")),
            ("occurrence", ("first", "all")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, not {getattr(self, name)!r}")
        if self.max_side is not None and self.max_side < 1:
            raise ValueError(f"max_side must be >= 1, got {self.max_side}")

    @classmethod
    def preset(cls, name: str) -> AttentionOptions:
        """``medebench`` (the defaults), ``daam`` (steps summed, bicubic upsampling) or ``p2p``
        (prompt-to-prompt's view: the down and up blocks' maps of at most 16 latent pixels)."""
        presets = {
            "medebench": cls(),
            "daam": cls(steps="sum", upsample="bicubic"),
            "p2p": cls(layers=("down", "up"), max_side=16),
        }
        if name not in presets:
            raise ValueError(f"unknown attention preset {name!r}; known: {', '.join(presets)}")
        return presets[name]

    def record(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "layers": list(self.layers), "heads": "mean"}


@dataclass(frozen=True)
class AttentionMaps:
    """One edit's heat map for one word.

    Attributes:
        edited: the model's output, ``(h, w, 3)`` uint8 (what ``model.edit`` returns).
        heatmap: ``(H, W)`` float64 in [0, 1], min-max normalised, at the requested size.
        raw: the same before normalisation.
        word: the token choice (positions, tokens, occurrence, how the word was chosen).
        layers: the layers aggregated, with their latent sizes ``(h, w)``.
        steps: diffusion steps recorded; chunk / n_chunks: the guidance chunk used.
        options: the :class:`AttentionOptions` used.
    """

    edited: np.ndarray
    heatmap: np.ndarray
    raw: np.ndarray
    word: TokenChoice
    layers: dict[str, tuple[int, int]]
    steps: int
    chunk: int
    n_chunks: int
    options: AttentionOptions

    def record(self) -> dict[str, Any]:
        """What a run stores beside the IoU (JSON-ready)."""
        return {
            **self.word.record(),
            "layers": {k: list(v) for k, v in self.layers.items()},
            "steps": self.steps,
            "chunk": self.chunk,
            "n_chunks": self.n_chunks,
            "options": self.options.record(),
        }


def capture_attention(
    model: Any,
    image: np.ndarray,
    instruction: str,
    *,
    seed: int,
    word: str | TokenChoice,
    size: tuple[int, int] | None = None,
    options: AttentionOptions | None = None,
) -> AttentionMaps:
    """Edit ``image`` with ``model`` (a diffusers model of :mod:`medibench.models.diffusers`) and
    return the heat map of ``word`` in ``instruction``, resized to ``size`` = ``(H, W)`` (default:
    the input's size, which is the mask's).

    Raises:
        WordNotInInstructionError: the word is not in the instruction (its words listed).
        NoCrossAttentionError: the pipeline has no cross-attention layers whose probabilities
            can be recorded.
    """
    options = options or AttentionOptions()
    pipe = _pipeline(model)
    choice = (
        word
        if isinstance(word, TokenChoice)
        else select_word(pipe.tokenizer, instruction, word, occurrence=options.occurrence)
    )
    rec = record_cross_attention(
        model, image, instruction, seed=seed, tokens=choice.positions,
        chunk=options.chunk, layers=options.layers, max_side=options.max_side,
    )  # fmt: skip
    size = size or (int(image.shape[0]), int(image.shape[1]))
    raw = heatmap_from_record(rec, size, options)
    return AttentionMaps(
        edited=rec.edited,
        heatmap=normalize_heatmap(raw),
        raw=raw,
        word=choice,
        layers={name: m.shape[1:3] for name, m in rec.maps.items()},
        steps=rec.steps,
        chunk=rec.chunk,
        n_chunks=rec.n_chunks,
        options=options,
    )


def heatmap_from_record(
    rec: CrossAttentionRecord, size: tuple[int, int], options: AttentionOptions
) -> np.ndarray:
    """``(H, W)`` map: per layer, steps summed or averaged, heads averaged, tokens merged,
    resized to ``size``; then the mean over layers (not normalised)."""
    import torch
    import torch.nn.functional as F

    if not rec.maps:
        raise NoCrossAttentionError(
            f"no cross-attention layer matched layers={list(options.layers)}, "
            f"max_side={options.max_side}"
        )
    total = None
    for summed in rec.maps.values():  # (heads, h, w, tokens), summed over steps
        m = summed / rec.steps if options.steps == "mean" else summed
        m = m.mean(axis=0)
        m = m.mean(axis=-1) if options.token_merge == "mean" else m.sum(axis=-1)
        t = torch.from_numpy(np.ascontiguousarray(m, dtype=np.float64))[None, None]
        up = F.interpolate(t, size=tuple(size), mode=options.upsample, align_corners=False)
        total = up[0, 0] if total is None else total + up[0, 0]
    assert total is not None
    out = (total / len(rec.maps)).numpy()
    if not np.isfinite(out).all():
        raise ValueError("the attention maps hold NaN or infinite values")
    return out


def _pipeline(model: Any) -> Any:
    pipe = getattr(model, "pipeline", None)
    if pipe is None or getattr(pipe, "tokenizer", None) is None:
        raise NoCrossAttentionError(
            f"{type(model).__name__} is not a diffusers text-conditioned pipeline model: "
            "attention capture needs one (ip2p:PATH, for instance)"
        )
    return pipe
