"""Model-based text metrics as plug-ins: BERTScore and RadGraph F1, each with its model from a
local path (nothing is downloaded; a missing file is a ``FileNotFoundError`` naming it).

* :class:`BERTScore`: greedy cosine matching of contextual token embeddings (Zhang et al.
  2020) as ``bert_score.score`` computes it with ``idf=False`` and no baseline rescaling, the
  official MedGEN settings (PubMedBERT ``microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract``,
  layer 12). Tokens: ``tokenizer.encode(text.strip())`` with the special tokens, truncated at the
  tokenizer's maximum; embeddings: hidden state ``num_layers`` (0 = the embedding layer), each
  token L2-normalised; ``[CLS]`` and ``[SEP]`` weigh 0, every other token 1. ``P`` is the mean
  over candidate tokens of their best cosine with a reference token, ``R`` the converse,
  ``F = 2PR/(P+R)``. An empty candidate or reference scores 0 (``bert_score`` warns and does
  the same). Each pair is encoded on its own, so no padding enters the cosine matrix
  (``bert_score`` multiplies padded cells by 0, which can only matter for a token whose every
  cosine is negative).
* :class:`RadGraphF1`: the ``radgraph`` package's ``F1RadGraph(reward_level="all")``, reading
  the code's choice, the RG_ER reward (entities and relations), skipped (``None`` with a reason)
  when either text has fewer than 4 word tokens or neither has an entity, as the code does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from medibench._strings import text_of
from medibench.metrics._text_forms import report_text, text_tokens

__all__ = ["BERTScore", "RadGraphF1", "RADGRAPH_MIN_TOKENS"]

#: RadGraph F1 is skipped when either text has fewer word tokens than this (the code's rule).
RADGRAPH_MIN_TOKENS = 4


class BERTScore:
    """BERTScore with the model saved at ``model_path`` (a transformers folder).

    Args:
        model_path: folder with ``config.json``, the weights and the tokenizer.
        num_layers: the hidden state used (the official setting is 12).
        device: torch device.

    Raises:
        FileNotFoundError: ``model_path`` or its ``config.json`` does not exist.
        ImportError: torch or transformers is missing (the ``torch`` extra).
        ValueError: ``num_layers`` is outside ``0..num_hidden_layers``.
    """

    def __init__(self, model_path: str | Path, *, num_layers: int = 12, device: str = "cpu"):
        path = Path(model_path)
        if not (path / "config.json").is_file():
            missing = path if not path.exists() else path / "config.json"
            raise FileNotFoundError(
                f"BERTScore model file {missing} does not exist: save the model (MedGEN uses "
                "microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract) to a local folder and "
                "pass that folder"
            )
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise ImportError(
                f"BERTScore needs torch and transformers ({exc}): pip install 'medibench[torch]'"
            ) from exc
        self._torch = torch
        self.model_path = path
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.model = AutoModel.from_pretrained(str(path)).to(device).eval()
        layers = int(getattr(self.model.config, "num_hidden_layers", 0))
        if not 0 <= num_layers <= layers:
            raise ValueError(f"num_layers must be in 0..{layers} for {path}, got {num_layers}")
        self.num_layers = num_layers
        self.device = device
        special = {self.tokenizer.cls_token_id, self.tokenizer.sep_token_id}
        self._special = {t for t in special if t is not None}

    def score(self, candidate: str, reference: str) -> tuple[float, float, float]:
        """``(precision, recall, F1)`` of ``candidate`` against ``reference``."""
        hyp_ids, hyp = self._embed(candidate)
        ref_ids, ref = self._embed(reference)
        torch = self._torch
        hyp_w = torch.tensor([0.0 if t in self._special else 1.0 for t in hyp_ids])
        ref_w = torch.tensor([0.0 if t in self._special else 1.0 for t in ref_ids])
        if hyp_w.sum() == 0 or ref_w.sum() == 0:
            return 0.0, 0.0, 0.0
        sim = hyp @ ref.T
        precision = float((sim.max(dim=1).values * hyp_w).sum() / hyp_w.sum())
        recall = float((sim.max(dim=0).values * ref_w).sum() / ref_w.sum())
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    def __call__(self, candidate: str, reference: str) -> float:
        """The F1 (what the code reports as ``BERT_Score``)."""
        return self.score(candidate, reference)[2]

    def _embed(self, text: str) -> tuple[list[int], Any]:
        tok = self.tokenizer
        limit = tok.model_max_length
        if limit > 10**6:  # a tokenizer saved without a maximum: the model's positions
            limit = int(self.model.config.max_position_embeddings)
        ids = tok.encode(text.strip(), add_special_tokens=True, max_length=limit, truncation=True)
        torch = self._torch
        with torch.inference_mode():
            out = self.model(
                torch.tensor([ids], device=self.device),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=self.device),
                output_hidden_states=True,
            )
        emb = out.hidden_states[self.num_layers][0].float().cpu()
        return ids, emb / emb.norm(dim=-1, keepdim=True)


Scorer = Callable[..., tuple[Any, Any, Sequence[Any], Sequence[Any]]]


class RadGraphF1:
    """RadGraph F1 (RG_ER) with the RadGraph model cached at ``model_path``.

    Args:
        model_path: the ``radgraph`` package's model cache folder holding ``model_type``.
        model_type: ``radgraph-xl`` (the code's default) or another the package knows.
        scorer: an ``F1RadGraph``-like callable ``(hyps=[..], refs=[..]) -> (mean_reward,
            reward_list, hyp_annotations, ref_annotations)`` to use instead (tests, other
            backends); then ``model_path`` is not read.

    Raises:
        FileNotFoundError: ``model_path`` does not exist.
        ImportError: the ``radgraph`` package is missing.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model_type: str = "radgraph-xl",
        scorer: Scorer | None = None,
    ) -> None:
        self.model_type = model_type
        if scorer is not None:
            self._scorer = scorer
            return
        path = Path(model_path) if model_path is not None else None
        if path is None or not path.exists():
            raise FileNotFoundError(
                f"RadGraph model folder {path} does not exist: put the radgraph package's "
                f"'{model_type}' model there (F1RadGraph model_cache_dir) and pass the folder"
            )
        try:
            import radgraph  # type: ignore[import-not-found]
        except ImportError as exc:
            raise ImportError(
                f"RadGraph F1 needs the radgraph package: pip install radgraph ({exc})"
            ) from None
        self._scorer = radgraph.F1RadGraph(
            reward_level="all", model_type=model_type, model_cache_dir=str(path)
        )

    def __call__(self, response: str, reference: object) -> tuple[float | None, str | None]:
        """``(RG_ER F1, None)``, or ``(None, why)`` when the code skips the pair."""
        ref_text = report_text(reference)  # type: ignore[arg-type]
        hyp_text = " ".join(text_of(response).split())
        if min(len(text_tokens(ref_text)), len(text_tokens(hyp_text))) < RADGRAPH_MIN_TOKENS:
            return None, f"RadGraph F1 skipped: a text has fewer than {RADGRAPH_MIN_TOKENS} tokens"
        mean, rewards, hyp_ann, ref_ann = self._scorer(hyps=[hyp_text], refs=[ref_text])
        if not _has_entities(hyp_ann) and not _has_entities(ref_ann):
            return None, "RadGraph F1 skipped: neither text has a RadGraph entity"
        if isinstance(mean, list | tuple) and len(mean) >= 2:
            return float(mean[1]), None
        if isinstance(rewards, list | tuple) and len(rewards) >= 2:
            er = rewards[1]
            return float(er[0] if isinstance(er, list | tuple) else er), None
        return float(mean), None


def _has_entities(annotations: Sequence[Any]) -> bool:
    first = annotations[0] if annotations else {}
    return bool(isinstance(first, dict) and first.get("entities"))
