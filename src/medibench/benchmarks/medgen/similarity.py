"""MedGEN-Bench's image-instruction similarity: how close each input image lies to its own
instruction in a CLIP-family embedding space, against the instructions of other samples.

The paper (arXiv 2511.13135, abstract) measures contextual entanglement, the dependence of an
instruction on its particular image, as the mean image-instruction similarity of its pairs, and
reports that its contextual augmentation of the instructions raised it from 0.273 to 0.372. The
official code (``yangjj007/MedGEN-Bench-eval`` at 3450b8e) does not compute it, and the paper's
text available here names neither the embedding model nor the pre-augmentation instructions,
which the release does not hold. So medibench computes, with the CLIP-family model you name:

* **matched**: for each sample, ``cos(image_i, instruction_i)``, its input image (``Sample.input``,
  the first input image of a multi-image record) against its own (released, augmented)
  instruction: the paper's quantity for the instructions as released;
* **shuffled**: ``mean_s cos(image_i, instruction_{pi_s(i)})`` over ``shuffles`` seeded
  derangements ``pi_s`` (permutations without a fixed point, so no image meets its own
  instruction), drawn over the whole set or within groups of a field (``within="task"``: the
  same task wording, another image instance). This control stands in for the paper's
  "before" value, which needs the pre-augmentation instructions: a named deviation;
* **difference** ``matched - shuffled`` per sample: its mean, a bootstrap CI of that mean over
  samples (the per-sample pairs resampled together) and the paired Wilcoxon signed-rank p-value
  (:func:`medibench.stats.paired_wilcoxon`, MedGEN-Bench's paired test).

Each mean has a percentile bootstrap CI (:func:`medibench.stats.bootstrap_ci`), per group of
each ``by`` field (format, task) and overall. Cosines are of the extractor's raw embeddings
(each normalised to unit length first), as CLIP scores them (without CLIPScore's ``w = 2.5`` and
clipping at 0).

This is not the pairing-sensitivity test (:mod:`medibench.benchmarks.medgen.controls`): that one
measures how a *model's* judged answer drops when its input image is replaced; this one measures
the *benchmark's* pairs themselves, before any model runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from medibench.samples import Sample, sample_field

__all__ = [
    "SimilarityRow",
    "cosine_rows",
    "derangement",
    "image_instruction_similarity",
    "pair_similarities",
    "similarity_rows",
]


@dataclass(frozen=True)
class SimilarityRow:
    """One group's summary: ``field`` and ``group`` (``"all"``, ``"all"`` for every sample),
    ``n``, the means of ``matched`` and ``shuffled`` and of their per-sample ``difference``, each
    with its bootstrap CI, and the paired Wilcoxon ``pvalue`` (``None`` for one sample)."""

    field: str
    group: str
    n: int
    matched: float
    matched_ci: tuple[float | None, float | None]
    shuffled: float
    shuffled_ci: tuple[float | None, float | None]
    difference: float
    difference_ci: tuple[float | None, float | None]
    pvalue: float | None


def derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly drawn permutation of ``range(n)`` with no fixed point: ``rng.permutation(n)``
    redrawn until no ``i`` maps to itself (on average ``e`` draws).

    Raises:
        ValueError: ``n < 2`` (one element cannot leave its place).
    """
    if n < 2:
        raise ValueError(f"a derangement needs at least 2 elements, got {n}")
    identity = np.arange(n)
    while True:
        perm = rng.permutation(n)
        if not np.any(perm == identity):
            return perm


def pair_similarities(
    image_embeddings: np.ndarray,
    text_embeddings: np.ndarray,
    *,
    shuffles: int = 10,
    seed: int = 0,
    blocks: Sequence[np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(matched, shuffled, partners)``: per-sample cosine of image ``i`` with text ``i``, the
    mean cosine with the texts its ``shuffles`` derangements give it, and those partners
    (``shuffles x N`` indices).

    The derangements come from one ``numpy.random.default_rng(seed)``: for each shuffle in turn,
    :func:`derangement` of each block in the order given (``blocks``: index arrays partitioning
    ``range(N)``; ``None`` is one block of every sample).

    Raises:
        ValueError: shapes that differ, fewer than 2 samples in a block, ``shuffles < 1``.
    """
    img = np.asarray(image_embeddings, dtype=np.float64)
    txt = np.asarray(text_embeddings, dtype=np.float64)
    if img.ndim != 2 or img.shape != txt.shape:
        raise ValueError(
            f"image embeddings {img.shape} and text embeddings {txt.shape} must be (N, D) alike"
        )
    if shuffles < 1:
        raise ValueError(f"shuffles must be >= 1, got {shuffles}")
    n = img.shape[0]
    parts = [np.arange(n)] if blocks is None else [np.asarray(b) for b in blocks]
    rng = np.random.default_rng(seed)
    partners = np.empty((shuffles, n), dtype=np.int64)
    for s in range(shuffles):
        for block in parts:
            partners[s, block] = block[derangement(block.size, rng)]
    matched = cosine_rows(img, txt)
    shuffled = np.mean([cosine_rows(img, txt[p]) for p in partners], axis=0)
    return matched, shuffled, partners


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two ``(N, D)`` arrays.

    Raises:
        ValueError: a row of zero length (its direction is undefined).
    """
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    if np.any(na == 0) or np.any(nb == 0):
        raise ValueError("an embedding of zero length has no direction (cosine undefined)")
    return np.einsum("ij,ij->i", a, b) / (na * nb)


def similarity_rows(
    matched: np.ndarray,
    shuffled: np.ndarray,
    groups: Mapping[str, Sequence[str]],
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 42,
) -> list[SimilarityRow]:
    """The overall row, then one row per value of each field of ``groups`` (field -> a label
    per sample), values sorted. CIs: :func:`medibench.stats.bootstrap_ci` (``seed``) of the
    matched, shuffled and difference values; ``n_resamples=0`` gives no interval (NaN), a group
    of one sample none either (``None``: one value has no spread to resample, shown ``n=1``)."""
    from medibench.stats import bootstrap_ci, paired_wilcoxon

    m, s = np.asarray(matched, dtype=np.float64), np.asarray(shuffled, dtype=np.float64)

    def ci(values: np.ndarray) -> tuple[float | None, float | None]:
        if n_resamples == 0:
            return (float("nan"), float("nan"))
        if values.size < 2:  # a zero-width interval would claim a certainty there is none
            return (None, None)
        return bootstrap_ci(values, n_resamples=n_resamples, seed=seed, level=level)

    def row(field: str, group: str, idx: np.ndarray) -> SimilarityRow:
        a, b = m[idx], s[idx]
        test = None
        if idx.size > 1:
            keys = [str(i) for i in range(idx.size)]
            res = paired_wilcoxon(dict(zip(keys, a, strict=True)), dict(zip(keys, b, strict=True)))
            test = res["pvalue"]
        return SimilarityRow(
            field, group, int(idx.size), float(a.mean()), ci(a), float(b.mean()), ci(b),
            float((a - b).mean()), ci(a - b), test,
        )  # fmt: skip

    rows = [row("all", "all", np.arange(m.size))]
    for field, labels in groups.items():
        values = np.asarray([str(v) for v in labels])
        for value in sorted(set(values.tolist())):
            rows.append(row(field, value, np.flatnonzero(values == value)))
    return rows


def image_instruction_similarity(
    samples: Sequence[Sample],
    extractor: Any,
    *,
    by: Sequence[str] = ("metadata.format", "task"),
    within: str | None = None,
    shuffles: int = 10,
    seed: int = 0,
    n_resamples: int = 1000,
    level: float = 0.95,
    batch_size: int = 16,
) -> dict[str, Any]:
    """The statistic of the module docstring for ``samples`` with ``extractor`` (a
    :func:`medibench.analysis.features.load_extractor` CLIP-family extractor).

    Returns ``{"settings", "samples": [{"sample_id", "matched", "shuffled", "partners"}],
    "rows": [SimilarityRow as dict]}``.

    Raises:
        ValueError: fewer than 2 samples (or 2 in a ``within`` group, naming it), a sample whose
            input image cannot be read (naming the sample and the file), an extractor without a
            text tower.
    """
    from medibench.analysis.features import Extractor
    from medibench.io import read_image

    if not isinstance(extractor, Extractor):
        raise ValueError(
            f"{type(extractor).__name__} is not an embedding extractor with a text tower: "
            "image-instruction similarity needs a CLIP-family model (clip:PATH)"
        )
    if len(samples) < 2:
        raise ValueError(
            f"image-instruction similarity needs at least 2 samples, got {len(samples)}"
        )
    blocks = None
    if within is not None:
        labels = np.asarray([str(sample_field(s, within)) for s in samples])
        blocks = []
        for value in sorted(set(labels.tolist())):
            idx = np.flatnonzero(labels == value)
            if idx.size < 2:
                raise ValueError(
                    f"--within {within}: group {value!r} has one sample "
                    f"({samples[int(idx[0])].sample_id}); a shuffle within it has no other "
                    "instruction to give"
                )
            blocks.append(idx)
    images = []
    for sample in samples:
        try:
            images.append(read_image(sample.input))
        except (OSError, ValueError) as exc:
            raise ValueError(
                f"sample {sample.sample_id}: its input image {sample.input} cannot be read ({exc})"
            ) from None
    texts = extractor.texts([s.instruction for s in samples], batch_size=batch_size)
    feats = extractor(images, batch_size=batch_size)
    matched, shuffled, partners = pair_similarities(
        feats, texts, shuffles=shuffles, seed=seed, blocks=blocks
    )
    groups = {field: [str(sample_field(s, field)) for s in samples] for field in by}
    rows = similarity_rows(matched, shuffled, groups, n_resamples=n_resamples, level=level)
    ids = [s.sample_id for s in samples]
    per_sample = [
        {
            "sample_id": sid,
            "matched": float(matched[i]),
            "shuffled": float(shuffled[i]),
            "partners": [ids[int(j)] for j in partners[:, i]],
        }
        for i, sid in enumerate(ids)
    ]
    settings = {
        "extractor": extractor.info,
        "shuffles": shuffles,
        "seed": seed,
        "within": within,
        "by": list(by),
        "resamples": n_resamples,
        "level": level,
        "bootstrap_seed": 42,
        "test": "paired Wilcoxon signed-rank (zero_method=wilcox), two-sided",
    }
    return {"settings": settings, "samples": per_sample, "rows": [asdict(r) for r in rows]}
