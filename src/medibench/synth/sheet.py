"""A contact sheet of the suite: one row per task type (input | target | mask), for people.

Each row is labelled with the task name, its perspective and scene modality, and the item's
instruction. Items are drawn in memory exactly as :func:`~medibench.synth.suite.generate_suite`
draws them (row ``t``: item ``t`` of its task, so the rows cycle through the modalities), with
matplotlib's Agg backend, and the PNG is written
atomically.

Example:
    >>> contact_sheet("suite.png", preset="medium", size=128)     # doctest: +SKIP
"""

from __future__ import annotations

import io
import os
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from medibench.io import atomic_write_bytes
from medibench.synth.suite import generate_item, plan_suite
from medibench.synth.tasks import Difficulty, get_difficulty

__all__ = ["contact_sheet"]


def contact_sheet(
    out_file: str | os.PathLike,
    *,
    preset: str | Difficulty = "medium",
    seed: int = 0,
    size: int = 128,
    tasks: Sequence[str] | None = None,
    modalities: Sequence[str] | None = None,
    dpi: int = 100,
) -> Path:
    """Draw one item of every task (one row each: input, target, mask) into a PNG.

    Row ``t`` shows item ``t`` of its task, so the rows walk through the modalities (item ``i``
    of a task uses its ``i % k``-th modality) instead of all showing the first one.

    Raises:
        ValueError: unknown task or modality names, a bad size or preset (as for
            :func:`~medibench.synth.suite.generate_suite`).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from medibench.synth.suite import _check_size  # the same size rule as the suite

    _check_size(size)
    diff = get_difficulty(preset)
    full = plan_suite(n_per_task=64, tasks=tasks, modalities=modalities)
    names = list(dict.fromkeys(p.task for p in full))
    plan = [p for p in full if p.index == names.index(p.task) % 64]
    rows = len(plan)
    fig, axes = plt.subplots(rows, 4, figsize=(11, 2.3 * rows), squeeze=False,
                             gridspec_kw={"width_ratios": [1.6, 1, 1, 1]})  # fmt: skip
    for r, planned in enumerate(plan):
        item, _ = generate_item(planned, difficulty=diff, size=size, seed=seed)
        mask = item.mask if item.mask is not None else np.ones(item.input.shape[:2], bool)
        label = (
            f"{planned.task}\n{_perspective(planned.task)} · {planned.modality}\n\n"
            + "\n".join(textwrap.wrap(item.instruction, 34))
        )
        axes[r, 0].text(0.0, 0.5, label, va="center", ha="left", fontsize=9, wrap=True)
        panels = (item.input, item.target, mask.astype(np.uint8) * 255)
        for c, (img, title) in enumerate(zip(panels, ("input", "target", "mask"), strict=True)):
            ax = axes[r, c + 1]
            ax.imshow(img, cmap="gray" if img.ndim == 2 else None, vmin=0, vmax=255,
                      interpolation="nearest")  # fmt: skip
            if r == 0:
                ax.set_title(title if item.mask is not None or c < 2 else "mask", fontsize=10)
            if c == 2 and item.mask is None:
                ax.text(0.5, 0.5, "whole image", color="black", ha="center", va="center",
                        transform=ax.transAxes, fontsize=8)  # fmt: skip
        for ax in axes[r]:
            ax.set_axis_off()
    fig.suptitle(f"medibench suite: one item per task (preset {diff.name}, seed {seed}, "
                 f"{size} px)", fontsize=12)  # fmt: skip
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / (2.3 * rows)))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    out = Path(out_file)
    return atomic_write_bytes(out, buf.getvalue())


def _perspective(task: str) -> str:
    from medibench.synth.tasks import TASKS

    return TASKS[task].perspective.value
