"""Reliability diagrams and confidence histograms (PNG or SVG, by the file's suffix).

The top panel draws each non-empty bin's accuracy as a bar at its edges, the gap to the bin's
mean confidence as a separate hatched bar (red where the bin is over-confident, blue where it is
under-confident, each labelled in the legend), and the diagonal; the bottom panel is the
histogram of top-label confidences over the same bins. Figures are built on
``matplotlib.figure.Figure`` (no pyplot state), SVGs without a date and with a fixed hash salt,
so the same predictions give the same file.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from medibench.calibration._binning import EdgePolicy
from medibench.calibration._inputs import Predictions
from medibench.calibration.metrics import expected_calibration_error, reliability_bins

__all__ = ["FORMATS", "reliability_diagram", "write_diagrams"]

FORMATS = ("png", "svg")

#: The gap bars: (face colour, edge colour, legend label), over-confident then under-confident.
_GAPS = (
    ("#e8a0a0", "#b03030", "gap, over-confident (confidence > accuracy)"),
    ("#a8c8ec", "#2a5d9a", "gap, under-confident (accuracy > confidence)"),
)


def reliability_diagram(
    pred: Predictions,
    path: str | Path,
    *,
    n_bins: int = 15,
    edges: EdgePolicy = "right",
    title: str | None = None,
) -> Path:
    """Draw ``pred``'s reliability diagram and confidence histogram into ``path`` (.png/.svg)."""
    import matplotlib

    from medibench.io import atomic_write_bytes

    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"{path}: a diagram is written as .png or .svg, not {path.suffix!r}")
    bins = reliability_bins(pred.probs, pred.labels, n_bins=n_bins, edges=edges)
    ece = expected_calibration_error(pred.probs, pred.labels, n_bins=n_bins, edges=edges)
    with matplotlib.rc_context({"svg.hashsalt": "medibench", "font.size": 9}):
        fig = _figure(bins, n_bins, ece, pred.n, title or pred.source)
        buf = io.BytesIO()
        meta = {"Date": None} if fmt == "svg" else {"Software": "medibench"}
        fig.savefig(buf, format=fmt, dpi=120, metadata=meta)
    return atomic_write_bytes(path, buf.getvalue())


def write_diagrams(
    pred: Predictions,
    out_dir: str | Path,
    *,
    n_bins: int = 15,
    by: Sequence[str] = (),
    formats: Sequence[str] = FORMATS,
) -> list[Path]:
    """``reliability.<fmt>`` for the whole file and ``reliability_<group>.<fmt>`` per group."""
    out = Path(out_dir)
    for fmt in formats:
        if fmt not in FORMATS:
            raise ValueError(f"diagram format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    parts: list[tuple[str, Predictions]] = [("reliability", pred)]
    for values, rows in pred.group_keys(list(by)) if by else []:
        key = "_".join(_safe(v) for v in values)
        parts.append((f"reliability_{key}", pred.subset(rows, source=" / ".join(values))))
    written = []
    for stem, part in parts:
        for fmt in formats:
            written.append(reliability_diagram(part, out / f"{stem}.{fmt}", n_bins=n_bins))
    return written


def _figure(bins, n_bins: int, ece: float, n: int, title: str):
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    fig = Figure(figsize=(4.2, 5.8))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    lo, hi = bins.edges[:n_bins], bins.edges[1 : n_bins + 1]
    full = bins.counts[:n_bins] > 0
    width = hi - lo
    acc = np.nan_to_num(bins.accuracy[:n_bins])
    conf = np.nan_to_num(bins.confidence[:n_bins])
    top.bar(
        lo[full],
        acc[full],
        width=width[full],
        align="edge",
        color="#3b6ea8",
        edgecolor="black",
        linewidth=0.5,
        label="accuracy",
    )
    # The gap is its own bar, coloured by its side: above the accuracy bar where the model is
    # over-confident (confidence > accuracy), below its top where it is under-confident.
    gap_lo = np.minimum(acc, conf)
    for side, (color, edge, label) in zip((conf > acc, conf < acc), _GAPS, strict=True):
        shown = full & side
        top.bar(
            lo[shown],
            np.abs(conf - acc)[shown],
            bottom=gap_lo[shown],
            width=width[shown],
            align="edge",
            color=color,
            alpha=0.7,
            hatch="//",
            edgecolor=edge,
            linewidth=0.5,
            label=label,
        )
    top.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1)
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.set_ylabel("accuracy")
    fig.suptitle(title, fontsize=9)
    # Handles of their own: an empty bar set (no over-confident bin, say) would lend its legend
    # entry matplotlib's default blue instead of its colour.
    handles = [
        Patch(facecolor="#3b6ea8", edgecolor="black", linewidth=0.5, label="accuracy"),
        *(
            Patch(facecolor=color, edgecolor=edge, alpha=0.7, hatch="//", linewidth=0.5,
                  label=label)
            for color, edge, label in _GAPS
        ),
    ]  # fmt: skip
    top.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.01), fontsize=7,
               frameon=False)  # fmt: skip
    top.text(
        0.97,
        0.05,
        f"ECE {100 * ece:.2f}%\nN = {n}",
        ha="right",
        va="bottom",
        transform=top.transAxes,
        fontsize=8,
    )
    bottom.bar(
        lo,
        bins.counts[:n_bins] / max(n, 1),
        width=width,
        align="edge",
        color="#888888",
        edgecolor="black",
        linewidth=0.5,
    )
    bottom.set_xlabel("confidence")
    bottom.set_ylabel("fraction")
    fig.tight_layout()
    return fig


def _safe(value: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in value) or "_"
