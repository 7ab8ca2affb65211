"""Feature metrics as protocols use them: per-pair LPIPS and embedding similarity, set-level FID
and KID, each with its extractor recorded.

``--features NAME:PATH`` (repeatable) configures extractors by role (:func:`feature_roles`):

* ``fid``: ``inception:PATH`` (or a ``module:callable``): set-level FID and KID of a model's
  outputs against the ground-truth images, per group and overall (:func:`set_scores`);
* ``embedding``: ``rad-dino:`` / ``dinov2:`` / ``hf:`` / ``clip:PATH``: cosine similarity of
  the output's and the ground truth's embeddings (:func:`pair_scores`);
* ``lpips``: ``lpips-alex:DIR`` / ``lpips-vgg:DIR``: LPIPS of output and ground truth, both
  resized to ``lpips_size`` (MedGEN-Bench: AlexNet at 256x256).

Extractors load once per process (:func:`cached_extractor`). Every value comes with the
extractor's :attr:`info` (name, weights sha256, resize filter and size) as a note or a field.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "cached_extractor",
    "describe_extractor",
    "feature_roles",
    "feature_summary",
    "merge_set_rows",
    "output_image",
    "skipped_outputs",
    "pair_scores",
    "set_scores",
]

_EMBEDDING = ("hf", "dinov2", "rad-dino", "clip")
#: Output files that are no image: a text answer (runs/_answers.py), an unreadable answer
#: (benchmarks/medgen/predictions.py).
_NOT_IMAGES = (".txt", ".error")


def feature_roles(specs: Sequence[str]) -> dict[str, str]:
    """``{"fid" | "embedding" | "lpips": spec}`` from ``--features`` values; a role given twice is
    an error (say which extractor counts)."""
    roles: dict[str, str] = {}
    for spec in specs:
        name = spec.partition(":")[0]
        if name.startswith("lpips-"):
            role = "lpips"
        elif name in _EMBEDDING:
            role = "embedding"
        elif name == "inception" or "." in name or name.isidentifier():
            role = "fid"
        else:
            raise ValueError(f"--features {spec!r}: unknown extractor {name!r}")
        if role in roles:
            raise ValueError(f"--features gives two {role} extractors: {roles[role]} and {spec}")
        roles[role] = spec
    return roles


@functools.lru_cache(maxsize=8)
def cached_extractor(spec: str, **options: Any) -> Any:
    """:func:`medibench.analysis.features.load_extractor`, loaded once per process."""
    from medibench.analysis.features import load_extractor

    return load_extractor(spec, **options)


def describe_extractor(info: Mapping[str, Any]) -> str:
    """One line for a record's notes: name, weights sha256 (first 12 hex), resize and size."""
    shas = ",".join(h[:12] for h in info.get("weights_sha256") or []) or "none"
    return (
        f"{info.get('name')} (weights sha256 {shas}; resize {info.get('resize')}, "
        f"size {info.get('size')})"
    )


def pair_scores(
    target: np.ndarray,
    prediction: np.ndarray,
    roles: Mapping[str, str],
    *,
    lpips_size: int | None = 256,
    lpips_resize: str = "pil-lanczos",
) -> tuple[dict[str, float], list[str]]:
    """``lpips`` and ``embedding_similarity`` of ``prediction`` against ``target`` (uint8 RGB)
    for the roles configured; returns the values and one note per extractor used."""
    from medibench.metrics.features import cosine_similarity

    values: dict[str, float] = {}
    notes: list[str] = []
    if "lpips" in roles:
        lp = cached_extractor(roles["lpips"], size=lpips_size, resize=lpips_resize)
        values["lpips"] = float(lp([target], [prediction])[0])
        notes.append(f"lpips by {describe_extractor(lp.info)}")
    if "embedding" in roles:
        ex = cached_extractor(roles["embedding"])
        feats = ex([target, prediction])
        values["embedding_similarity"] = float(cosine_similarity(feats[:1], feats[1:])[0])
        notes.append(f"embedding_similarity by {describe_extractor(ex.info)}")
    return values, notes


def set_scores(
    groups: Mapping[str, tuple[Sequence[np.ndarray], Sequence[np.ndarray]]],
    spec: str,
    *,
    kid_subset_size: int = 1000,
    kid_subsets: int = 100,
    ci_resamples: int = 0,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """FID and KID of each group's outputs against its ground-truth images.

    ``groups`` maps a group name (a region, ``all``) to ``(targets, predictions)``. Each row:
    ``group, n_targets, n_outputs, fid, kid, kid_std, kid_subset_size`` (FID/KID CIs when
    ``ci_resamples`` > 0), ``notes`` (a singular covariance, a capped subset) and ``extractor``
    (its info). Features are extracted once per image list.
    """
    from medibench.metrics.features import (
        FeatureSetWarning,
        frechet_distance,
        frechet_distance_ci,
        kid,
    )

    ex = cached_extractor(spec)
    rows = []
    for group, (targets, outputs) in groups.items():
        row: dict[str, Any] = {
            "group": group,
            "n_targets": len(targets),
            "n_outputs": len(outputs),
            "extractor": dict(ex.info),
            "notes": [],
        }
        if len(targets) < 2 or len(outputs) < 2:
            row.update(fid=None, kid=None, kid_std=None)
            row["notes"].append("FID and KID need at least 2 images on each side")
            rows.append(row)
            continue
        real, fake = ex(list(targets)), ex(list(outputs))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FeatureSetWarning)
            row["fid"] = frechet_distance(real, fake)
            k = kid(real, fake, subset_size=kid_subset_size, subsets=kid_subsets, seed=seed)
        row["notes"] += list(dict.fromkeys(str(w.message) for w in caught))
        row.update(kid=k.mean, kid_std=k.std, kid_subset_size=k.subset_size)
        if ci_resamples:
            low, high = frechet_distance_ci(real, fake, n_resamples=ci_resamples, seed=seed)
            row.update(fid_ci_low=low, fid_ci_high=high)
        rows.append(row)
    return rows


def feature_summary(
    samples: Sequence[Any],
    outputs: Mapping[str, Mapping[str, Any]],
    roles: Mapping[str, str],
    *,
    by: str = "region",
    ci_resamples: int = 1000,
    ci_seed: int = 42,
    fid_ci_resamples: int = 0,
) -> list[dict[str, Any]]:
    """Score-summary rows of the feature metrics, per model and group (``by``) and ``all``.

    ``outputs`` is ``{model: {sample_id: path}}`` (the first output of each sample). Each row:
    ``model, group, n``, the FID/KID of the group's outputs against its ground truths (role
    ``fid``), and the means with bootstrap CIs (:func:`medibench.stats.bootstrap_ci`, 1,000
    resamples, seed 42) of the per-pair ``lpips`` and ``embedding_similarity``; ``extractors``
    names every extractor used. Samples without a ground-truth image are left out, counted in
    ``n_no_target``; an output that is no image (a text answer: ``<id>_<k>.txt``, scored by the
    image beside it when there is one) is left out too, counted in ``n_no_image`` and named in
    ``no_image`` (the files, for a note).
    """
    from medibench.datasets import load_images
    from medibench.io import read_image
    from medibench.samples import sample_field
    from medibench.stats import bootstrap_ci

    rows: list[dict[str, Any]] = []
    for model, files in outputs.items():
        pairs: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        per_pair: dict[str, dict[str, list[float]]] = {}
        no_target = 0
        no_image: list[str] = []
        used: dict[str, str] = {}
        for s in samples:
            if s.sample_id not in files:
                continue
            image = output_image(files[s.sample_id])
            if image is None:
                no_image.append(str(files[s.sample_id]))
                continue
            target = load_images(s).target
            if target is None:
                no_target += 1
                continue
            pred = read_image(image)
            group = str(sample_field(s, by))  # as the protocol summaries group
            for g in (group, "all"):
                pairs.setdefault(g, []).append((target, pred))
            if "lpips" in roles or "embedding" in roles:
                scored, notes = pair_scores(target, _resized(pred, target), roles)
                for n in notes:
                    used[n.split(" by ", 1)[0]] = n.split(" by ", 1)[1]
                for g in (group, "all"):
                    for name, v in scored.items():
                        per_pair.setdefault(g, {}).setdefault(name, []).append(v)
        sets = {}
        if "fid" in roles:
            groups = {g: ([t for t, _ in p], [o for _, o in p]) for g, p in pairs.items()}
            for r in set_scores(groups, roles["fid"], ci_resamples=fid_ci_resamples):
                sets[r["group"]] = r
                used["fid"] = describe_extractor(r["extractor"])
        for g in sorted(pairs, key=lambda x: (x == "all", x)):
            row: dict[str, Any] = {"model": model, "group": g, "n": len(pairs[g])}
            if g in sets:
                for key in ("fid", "fid_ci_low", "fid_ci_high", "kid", "kid_std"):
                    if key in sets[g]:
                        row[key] = sets[g][key]
                row["set_notes"] = "; ".join(sets[g]["notes"]) or None
            for name, values in per_pair.get(g, {}).items():
                row[name] = float(np.mean(values))
                if ci_resamples and len(values) > 1:
                    low, high = bootstrap_ci(values, n_resamples=ci_resamples, seed=ci_seed)
                    row[f"{name}_ci_low"], row[f"{name}_ci_high"] = low, high
            row["n_no_target"] = no_target
            row["n_no_image"] = len(no_image)
            row["no_image"] = "; ".join(no_image) or None
            row["extractors"] = "; ".join(f"{k}: {v}" for k, v in used.items())
            rows.append(row)
    return rows


def skipped_outputs(rows: Sequence[Mapping[str, Any]], shown: int = 3) -> list[str]:
    """One note per model of :func:`feature_summary`'s ``rows`` whose outputs were left out for
    not being images, naming the first ``shown`` files."""
    notes = []
    for r in rows:
        if r["group"] != "all" or not r.get("n_no_image"):
            continue
        files = str(r["no_image"]).split("; ")
        more = f" and {len(files) - shown} more" if len(files) > shown else ""
        notes.append(
            f"{r['model']}: {len(files)} output(s) not an image (a text answer without an "
            f"image beside it), left out of the feature metrics: "
            f"{', '.join(files[:shown])}{more}"
        )
    return notes


def output_image(path: str | os.PathLike) -> Path | None:
    """The image of an output file: ``path`` itself, or for a text answer (``.txt``, as
    answering and compositional models write beside their images) the ``.png`` beside it;
    ``None`` when there is no image."""
    p = Path(path)
    if p.suffix.lower() not in _NOT_IMAGES:
        return p
    png = p.with_suffix(".png")
    return png if png.is_file() else None


def _resized(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The output at the ground truth's size (PIL LANCZOS, as MedGEN-Bench's code resizes)."""
    if pred.shape[:2] == target.shape[:2]:
        return pred
    from PIL import Image

    size = (target.shape[1], target.shape[0])
    return np.asarray(Image.fromarray(pred).resize(size, Image.Resampling.LANCZOS))


def merge_set_rows(
    summary: list[dict[str, Any]], feature_rows: Sequence[Mapping[str, Any]], by: str
) -> int:
    """Put the set-level ``fid`` and ``kid`` (and FID CIs) of :func:`feature_summary` into a
    protocol's summary rows (``@1`` rows: the first output per sample, what the features used)
    of grouping ``by`` and the overall micro row. Returns the rows filled."""
    sets = {(r["model"], str(r["group"])): r for r in feature_rows}
    filled = 0
    for row in summary:
        if not str(row.get("k_mode", "@1")).startswith("@1"):
            continue
        group = "all" if row["by"] == "all" and row["group"] == "micro" else str(row["group"])
        if row["by"] not in (by, "all"):
            continue
        got = sets.get((row["model"], group))
        if got is None or got.get("fid") is None:
            continue
        for key in ("fid", "fid_ci_low", "fid_ci_high", "kid", "kid_std"):
            if key in got:
                row[key] = got[key]
        row["fid_n"] = row["kid_n"] = got["n"]
        filled += 1
    return filled
