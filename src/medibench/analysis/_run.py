"""The attention stage of a run: capture, grounding IoU, heat-map PNGs, rows in the run store.

Each (sample, k) is edited with the seed ``medibench run`` gives it (:func:`medibench.runs.
seed_for`), so the captured edit is the run's own output: when the run holds that prediction,
``matches_prediction`` records that the pixels are equal. A sample without a mask, with an
unreadable image or whose instruction lacks the word is a row with ``status = "error"`` and the
reason; the stage goes on. A re-run skips the rows already ``ok``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medibench.analysis._store import declare_attention, put_attention, read_attention
from medibench.analysis._tokens import instruction_words, select_word
from medibench.analysis.grounding import diagnose, grounding

__all__ = [
    "SUMMARY_FILE",
    "AttentionStage",
    "analyze_attention",
    "attention_summary",
    "judged_accuracy",
    "key_word",
]

ATTENTION_DIR = Path("analysis") / "attention"
#: ``medibench analyze attention`` writes :func:`attention_summary` here, in the run folder.
SUMMARY_FILE = "attention_summary.json"
#: The diagnoses of :func:`~medibench.analysis.diagnose`, as :func:`attention_summary` counts them.
_VERDICTS = {"grounded": "grounded", "conservative edit": "conservative_edit",
             "mislocalised": "mislocalised"}  # fmt: skip


@dataclass
class AttentionStage:
    """What :func:`analyze_attention` did: rows written, skipped (already done), failed."""

    model: str
    written: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)


def key_word(instruction: str, region: str) -> tuple[str, str]:
    """The word whose attention is read when none is given, and how it was chosen: the
    sample's ``region`` when it is a word of the instruction, else the instruction's longest
    word (the last of equally long ones)."""
    words = instruction_words(instruction)
    if not words:
        raise ValueError(f"instruction {instruction!r} has no words")
    lower = {w.lower(): w for w in words}
    if region and region.lower() in lower:
        return lower[region.lower()], "region"
    longest = max(len(w) for w in words)
    return [w for w in words if len(w) == longest][-1], "longest"


def analyze_attention(
    samples: Sequence[Any],
    model: Any,
    store: Any,
    *,
    word: str | None = None,
    k: int = 1,
    seed: int = 0,
    alpha: float = 1.3,
    options: Any = None,
    redo: bool = False,
    on_item: Callable[[], None] | None = None,
    model_spec: dict[str, Any] | None = None,
) -> AttentionStage:
    """Capture attention for ``k`` draws of every sample, write rows and PNGs into the run.

    Raises :class:`~medibench.analysis.NoCrossAttentionError` before anything is written when
    the model's attention cannot be captured (joint-attention transformers such as FLUX.1
    Kontext and Qwen-Image-Edit).

    ``model`` is a loaded diffusers model (``model.name`` names it in the store); ``store`` an
    open :class:`~medibench.runs.RunStore` (the caller holds the run folder's lock);
    ``model_spec`` (``ModelSpec.to_dict()``) goes into every row's details.
    """
    from medibench._identity import output_folder, seed_for
    from medibench.analysis._recorder import NoCrossAttentionError, check_cross_attention
    from medibench.analysis.attention import AttentionOptions, capture_attention
    from medibench.io import ImageReadError, read_image, read_mask, write_image

    options = options or AttentionOptions()
    check_cross_attention(model)  # a model without capturable attention fails the stage at once
    declare_attention(store)
    store.put_samples(samples)
    done = {
        (r["sample_id"], r["k"])
        for r in read_attention(store.connection)
        if r["model"] == model.name and r["status"] == "ok"
    }
    stored = {(p.sample_id, p.k): p for p in store.predictions(model.name, status="ok") if p.path}
    folder = ATTENTION_DIR / output_folder(model.name)
    report = AttentionStage(model.name)
    for s in samples:
        for j in range(k):
            if (s.sample_id, j) in done and not redo:
                report.skipped += 1
                continue
            item_seed = seed_for(seed, s.sample_id, j)
            row: dict[str, Any] = {
                "model": model.name,
                "sample_id": s.sample_id,
                "k": j,
                "seed": item_seed,
                "region": s.region,
                "alpha": alpha,
            }
            try:
                if not s.mask:
                    raise ValueError("the sample has no ROI mask")
                image = read_image(s.input)
                mask = read_mask(s.mask)
                w, how = (word, "given") if word else key_word(s.instruction, s.region)
                choice = select_word(
                    model.pipeline.tokenizer,
                    s.instruction,
                    w,
                    occurrence=options.occurrence,
                    how=how,
                )
                maps = capture_attention(
                    model,
                    image,
                    s.instruction,
                    seed=item_seed,
                    word=choice,
                    size=mask.shape,
                    options=options,
                )
            except NoCrossAttentionError:
                raise
            except (ValueError, ImageReadError, FileNotFoundError) as exc:
                row.update(status="error", error=f"{s.sample_id}: {exc}", word=word)
                put_attention(store, row)
                report.failed.append(row["error"])
                if on_item:
                    on_item()
                continue
            g = grounding(maps.heatmap, mask, alpha=alpha)
            heat_rel = folder / f"{s.sample_id}_{j}_heat.png"
            overlay_rel = folder / f"{s.sample_id}_{j}_overlay.png"
            write_image(store.run_dir / heat_rel, np.round(maps.heatmap * 255).astype(np.uint8))
            write_image(
                store.run_dir / overlay_rel, overlay(image, maps.heatmap, mask, g.threshold)
            )
            row.update(
                status="ok",
                word=choice.word,
                iou=g.iou,
                note=g.note,
                otsu=g.otsu,
                threshold=g.threshold,
                heatmap=heat_rel.as_posix(),
                overlay=overlay_rel.as_posix(),
                matches_prediction=_matches(stored.get((s.sample_id, j)), maps.edited, store),
                details={**maps.record(), "size": list(mask.shape), "model_spec": model_spec},
            )
            put_attention(store, row)
            report.written += 1
            if on_item:
                on_item()
    return report


def overlay(
    image: np.ndarray, heatmap: np.ndarray, mask: np.ndarray, threshold: float
) -> np.ndarray:
    """The input (resized to the map) under the heat map (jet, 50%), the ROI outlined in green
    and the binarised map (``heatmap > threshold``) in white; uint8 RGB."""
    import cv2

    h, w = heatmap.shape
    base = image if image.ndim == 3 else np.dstack([image] * 3)
    base = base[..., :3]
    if base.dtype != np.uint8:
        base = np.clip(base, 0, 255).astype(np.uint8)
    if base.shape[:2] != (h, w):
        base = cv2.resize(base, (w, h), interpolation=cv2.INTER_AREA)
    colour = cv2.applyColorMap(np.round(heatmap * 255).astype(np.uint8), cv2.COLORMAP_JET)
    out = cv2.addWeighted(base, 0.5, cv2.cvtColor(colour, cv2.COLOR_BGR2RGB), 0.5, 0.0)
    for region, rgb in (((heatmap > threshold), (255, 255, 255)), (mask, (0, 255, 0))):
        contours, _ = cv2.findContours(
            region.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE
        )
        cv2.drawContours(out, contours, -1, rgb, 1)
    return out


def judged_accuracy(scores: Sequence[Any], metric: str = "ea") -> dict[tuple[str, str, int], float]:
    """``(model, sample_id, k) -> accuracy`` from the run's judged scores (MedEBench's ``ea``,
    in [0, 1]); the first protocol with a value wins."""
    out: dict[tuple[str, str, int], float] = {}
    for sc in scores:
        v = sc.metrics.get(metric)
        key = (sc.model or "", sc.sample_id, sc.k)
        if v is not None and not math.isnan(v) and key not in out:
            out[key] = float(v)
    return out


def summary_rows(rows: Sequence[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """Per region and overall: samples, IoU mean over the rows with a value, zero and NaN
    counts."""
    groups: dict[str, list[float | None]] = {}
    for r in rows:
        if r["model"] == model and r["status"] == "ok":
            groups.setdefault(r.get("region") or "(none)", []).append(r.get("iou"))
    groups["overall"] = [v for vs in groups.values() for v in vs]
    out = []
    for region, vals in groups.items():
        present = [v for v in vals if v is not None]
        out.append(
            {
                "region": region,
                "n": len(vals),
                "iou": float(np.mean(present)) if present else None,
                "zero": sum(v == 0 for v in present),
                "nan": len(vals) - len(present),
            }
        )
    return out


def attention_summary(
    rows: Sequence[dict[str, Any]], scores: Sequence[Any]
) -> list[dict[str, Any]]:
    """The printed tables of every model in ``rows`` (the run's ``attention`` table) as rows:
    ``model``, ``region`` (each, then ``overall``), ``n``, ``iou``, ``zero``, ``nan`` as
    :func:`summary_rows`, and how many were diagnosed ``grounded``, ``conservative_edit`` and
    ``mislocalised`` against the run's judged editing accuracy (``None`` when the model has
    none judged)."""
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        diagnosed = diagnosis_rows([r for r in rows if r["model"] == model], scores)
        for row in summary_rows(rows, model):
            counts = dict.fromkeys(_VERDICTS.values(), None if not diagnosed else 0)
            for d in diagnosed:
                if row["region"] in ("overall", d.get("region") or "(none)"):
                    counts[_VERDICTS[d["diagnosis"]]] += 1
            out.append({"model": model, **row, **counts})
    return out


def diagnosis_rows(
    rows: Sequence[dict[str, Any]], scores: Sequence[Any], **thresholds: float
) -> list[dict[str, Any]]:
    """:func:`~medibench.analysis.diagnose` of the ok rows against the run's judged ``ea``."""
    ok = [r for r in rows if r["status"] == "ok"]
    return diagnose(ok, judged_accuracy(scores), **thresholds)


def _matches(pred: Any, edited: np.ndarray, store: Any) -> int | None:
    if pred is None:
        return None
    from medibench.io import read_image

    path = Path(pred.path)
    path = path if path.is_absolute() else store.run_dir / path
    try:
        return int(np.array_equal(read_image(path), edited))
    except (OSError, ValueError):
        return None
