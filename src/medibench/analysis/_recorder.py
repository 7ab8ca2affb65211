"""The recording attention processor behind :mod:`medibench.analysis.attention`."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "CrossAttentionRecord",
    "NoCrossAttentionError",
    "check_cross_attention",
    "latent_grid",
    "record_cross_attention",
]

_SUPPORTED = ("AttnProcessor", "AttnProcessor2_0")


class NoCrossAttentionError(ValueError):
    """The model has no cross-attention whose probabilities can be recorded."""


@dataclass(frozen=True)
class CrossAttentionRecord:
    """One edit's cross-attention: ``edited`` (the output, uint8), ``maps`` per layer name as
    ``(heads, h, w, tokens)`` float64 arrays summed over the ``steps`` recorded, the guidance
    ``chunk`` used of ``n_chunks``, the ``tokens`` positions recorded, and ``per_step`` (per
    layer, one ``(heads, h, w, tokens)`` array per step) when asked for."""

    edited: np.ndarray
    maps: dict[str, np.ndarray]
    steps: int
    chunk: int
    n_chunks: int
    tokens: tuple[int, ...] | None
    per_step: dict[str, list[np.ndarray]] | None = None


def record_cross_attention(
    model: Any,
    image: np.ndarray,
    instruction: str,
    *,
    seed: int,
    tokens: Sequence[int] | None = None,
    chunk: int | str = "conditional",
    layers: Sequence[str] = ("down", "mid", "up"),
    max_side: int | None = None,
    keep_steps: bool = False,
) -> CrossAttentionRecord:
    """Run ``model.edit(image, instruction, seed=seed)`` recording cross-attention.

    ``tokens``: encoder positions to keep (``None``: all of them, whose maps then sum to one
    over tokens at every pixel). ``chunk``: ``"conditional"`` or a chunk index.
    ``layers``/``max_side``: which layers (see :class:`~medibench.analysis.AttentionOptions`).
    """
    pipe = model.pipeline
    denoiser, found = check_cross_attention(model)
    working = model._prepare(np.asarray(image))
    scale = int(getattr(pipe, "vae_scale_factor", 8))
    recorder = _Recorder(
        latent=(working.size[1] // scale, working.size[0] // scale),
        tokens=None if tokens is None else tuple(int(t) for t in tokens),
        chunk=chunk,
        ip2p="InstructPix2Pix" in type(pipe).__name__,
        max_side=max_side,
        keep_steps=keep_steps,
    )
    chosen = {n: a for n, a in found.items() if _block(n) in (None, *layers)}
    # The latent's size is read from the denoiser's input at every call: a pipeline may work at
    # another size than the prepared image's (SDXL InstructPix2Pix: its square sample size).
    hook = denoiser.register_forward_pre_hook(recorder.read_latent, with_kwargs=True)
    try:
        with _installed(chosen, recorder):
            edited = model.edit(image, instruction, seed=seed)
    finally:
        hook.remove()
    steps = set(recorder.counts.values())
    if len(steps) > 1:
        raise RuntimeError(f"layers were called different numbers of times: {recorder.counts}")
    return CrossAttentionRecord(
        edited=edited,
        maps={n: s.numpy() for n, s in recorder.sums.items()},
        steps=steps.pop() if steps else 0,
        chunk=-1 if recorder.chunk_used is None else recorder.chunk_used,
        n_chunks=recorder.n_chunks or 0,
        tokens=recorder.tokens,
        per_step={n: [x.numpy() for x in v] for n, v in recorder.steps.items()}
        if keep_steps
        else None,
    )


def check_cross_attention(model: Any) -> tuple[Any, dict[str, Any]]:
    """``(denoiser, {layer name: Attention module})`` of ``model``'s pipeline, or
    :class:`NoCrossAttentionError` saying why its attention cannot be captured (no pipeline, no
    cross-attention layers, a processor that exposes no probabilities)."""
    pipe = getattr(model, "pipeline", None)
    if pipe is None:
        raise NoCrossAttentionError(
            f"{type(model).__name__} is not a diffusers pipeline model: no attention to capture"
        )
    denoiser = getattr(pipe, "unet", None) or getattr(pipe, "transformer", None)
    if denoiser is None:
        raise NoCrossAttentionError(f"{type(pipe).__name__} has no unet or transformer")
    return denoiser, _cross_attention_layers(pipe, denoiser)


def latent_grid(h0: int, w0: int, n: int) -> tuple[int, int]:
    """The (h, w) of a layer with ``n`` positions in a denoiser whose input latent is
    ``h0 x w0``: halved (rounding up, as stride-2 convolutions do) until ``h * w == n``."""
    h, w = h0, w0
    while h * w > n:
        h, w = math.ceil(h / 2), math.ceil(w / 2)
    if h * w != n:
        raise ValueError(f"{n} attention positions fit no downsampling of the {h0}x{w0} latent")
    return h, w


# -- helpers ---------------------------------------------------------------------------------
def _cross_attention_layers(pipe: Any, denoiser: Any) -> dict[str, Any]:
    from diffusers.models.attention_processor import Attention

    where = f"{type(pipe).__name__} ({type(denoiser).__name__})"
    layers, unsupported = {}, set()
    for name, module in denoiser.named_modules():
        if isinstance(module, Attention) and module.is_cross_attention:
            kind = type(module.processor).__name__
            if kind not in _SUPPORTED:
                unsupported.add(kind)
            layers[name] = module
    if unsupported:
        raise NoCrossAttentionError(
            f"{where}: its cross-attention runs through {', '.join(sorted(unsupported))}, which "
            f"exposes no attention probabilities; capture supports {', '.join(_SUPPORTED)}"
        )
    if not layers:
        raise NoCrossAttentionError(
            f"{where} has no cross-attention layers (diffusers Attention modules attending to "
            "text): attention capture needs a text-to-image cross-attention denoiser such as "
            "InstructPix2Pix's UNet (joint-attention transformers mix text and image tokens)"
        )
    return layers


def _block(name: str) -> str | None:
    head = name.split(".", 1)[0]
    return {"down_blocks": "down", "mid_block": "mid", "up_blocks": "up"}.get(head)


@contextmanager
def _installed(layers: dict[str, Any], recorder: _Recorder) -> Iterator[None]:
    originals = {name: attn.processor for name, attn in layers.items()}
    try:
        for name, attn in layers.items():
            attn.set_processor(_RecordingProcessor(name, originals[name], recorder))
        yield
    finally:
        for name, attn in layers.items():
            attn.set_processor(originals[name])


class _RecordingProcessor:
    """Computes the layer's output with its own processor and records the probabilities."""

    def __init__(self, name: str, original: Any, recorder: _Recorder) -> None:
        self.name, self.original, self.recorder = name, original, recorder

    def __call__(
        self,
        attn: Any,
        hidden_states: Any,
        encoder_hidden_states: Any = None,
        attention_mask: Any = None,
        temb: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        out = self.original(
            attn, hidden_states, encoder_hidden_states, attention_mask, temb, *args, **kwargs
        )
        if encoder_hidden_states is not None:
            self.recorder.record(
                self.name, attn, hidden_states, encoder_hidden_states, attention_mask, temb
            )
        return out


class _Recorder:
    def __init__(
        self,
        *,
        latent: tuple[int, int],
        tokens: tuple[int, ...] | None,
        chunk: int | str,
        ip2p: bool,
        max_side: int | None,
        keep_steps: bool,
    ) -> None:
        self.latent, self.tokens, self.chunk, self.ip2p = latent, tokens, chunk, ip2p
        self.max_side, self.keep_steps = max_side, keep_steps
        self.sums: dict[str, Any] = {}
        self.counts: dict[str, int] = {}
        self.steps: dict[str, list[Any]] = {}
        self.n_chunks: int | None = None
        self.chunk_used: int | None = None

    def read_latent(self, module: Any, args: tuple, kwargs: dict[str, Any]) -> None:
        """Forward pre-hook of the denoiser: its latent input ``(B, C, h, w)`` sets the grid."""
        sample = args[0] if args else kwargs.get("sample", kwargs.get("hidden_states"))
        if sample is not None and getattr(sample, "ndim", 0) == 4:
            self.latent = (int(sample.shape[-2]), int(sample.shape[-1]))

    def _chunk_index(self, n_chunks: int) -> int:
        if isinstance(self.chunk, int):
            if not 0 <= self.chunk < n_chunks:
                raise ValueError(f"chunk {self.chunk} out of range: the batch has {n_chunks}")
            return self.chunk
        if self.chunk != "conditional":
            raise ValueError(f"chunk must be an index or 'conditional', not {self.chunk!r}")
        if n_chunks == 1:
            return 0
        if self.ip2p and n_chunks == 3:
            return 0  # InstructPix2Pix: [text + image, image only, unconditional]
        if not self.ip2p and n_chunks == 2:
            return 1  # Stable Diffusion: [unconditional, conditional]
        raise ValueError(
            f"cannot tell the conditional chunk of a batch of {n_chunks} guidance chunks: "
            "give chunk=INDEX"
        )

    def record(self, name, attn, hidden_states, encoder_hidden_states, attention_mask, temb):
        import torch

        if attention_mask is not None:
            raise NoCrossAttentionError(
                f"layer {name} got an attention mask: capture of masked cross-attention is "
                "not supported"
            )
        n_chunks = int(encoder_hidden_states.shape[0])  # one prompt per edit
        self.n_chunks = n_chunks
        c = self.chunk_used = self._chunk_index(n_chunks)
        hs, ehs = hidden_states[c : c + 1], encoder_hidden_states[c : c + 1]
        if attn.spatial_norm is not None:
            hs = attn.spatial_norm(hs, None if temb is None else temb[c : c + 1])
        if hs.ndim == 4:
            b, ch, h, w = hs.shape
            hs = hs.view(b, ch, h * w).transpose(1, 2)
        if attn.group_norm is not None:
            hs = attn.group_norm(hs.transpose(1, 2)).transpose(1, 2)
        n = int(hs.shape[1])
        grid = latent_grid(*self.latent, n)
        if self.max_side is not None and max(grid) > self.max_side:
            return
        if attn.norm_cross:
            ehs = attn.norm_encoder_hidden_states(ehs)
        q = attn.head_to_batch_dim(attn.to_q(hs))
        k = attn.head_to_batch_dim(attn.to_k(ehs))
        if getattr(attn, "norm_q", None) is not None:
            q, k = attn.norm_q(q), attn.norm_k(k)
        probs = attn.get_attention_scores(q, k, None)  # (heads, n, tokens)
        if self.tokens is not None:
            probs = probs[..., list(self.tokens)]
        maps = probs.to(torch.float64).reshape(probs.shape[0], *grid, probs.shape[-1]).cpu()
        self.counts[name] = self.counts.get(name, 0) + 1
        self.sums[name] = maps if name not in self.sums else self.sums[name] + maps
        if self.keep_steps:
            self.steps.setdefault(name, []).append(maps)
