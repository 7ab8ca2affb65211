"""Looking inside models: attention grounding and feature extractors (docs/analysis.md).

* :func:`grounding_iou`, :func:`grounding`, :func:`normalize_heatmap`, :func:`diagnose`:
  MedEBench's attention-grounding IoU and failure diagnosis (numpy only).
* :func:`capture_attention`, :class:`AttentionOptions`, :func:`record_cross_attention`
  (:mod:`medibench.analysis.attention`, extra ``torch``): cross-attention heat maps of a
  diffusers pipeline, the edit unchanged.
* :func:`load_extractor` (:mod:`medibench.analysis.features`): declared feature extractors
  (pytorch-fid Inception-v3, transformers vision models, CLIP, LPIPS, ``module:callable``).

The torch parts import on first use, so ``import medibench.analysis`` stays light.
"""

from __future__ import annotations

from medibench.analysis._tokens import (
    TokenChoice,
    WordNotInInstructionError,
    instruction_words,
    select_word,
)
from medibench.analysis.grounding import (
    Grounding,
    diagnose,
    grounding,
    grounding_iou,
    normalize_heatmap,
)
from medibench.registry import lazy_attributes

__all__ = [
    "AttentionMaps",
    "AttentionOptions",
    "Grounding",
    "NoCrossAttentionError",
    "TokenChoice",
    "WordNotInInstructionError",
    "capture_attention",
    "diagnose",
    "grounding",
    "grounding_iou",
    "instruction_words",
    "load_extractor",
    "normalize_heatmap",
    "record_cross_attention",
    "select_word",
]

_LAZY = {
    "AttentionMaps": "medibench.analysis.attention",
    "AttentionOptions": "medibench.analysis.attention",
    "NoCrossAttentionError": "medibench.analysis._recorder",
    "capture_attention": "medibench.analysis.attention",
    "record_cross_attention": "medibench.analysis._recorder",
    "load_extractor": "medibench.analysis.features",
}
__getattr__ = lazy_attributes(__name__, _LAZY)
