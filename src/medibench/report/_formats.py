"""Tables as text a paper can take: Markdown, LaTeX (booktabs), CSV and JSON.

A table is a list of dict rows and the columns to show. A column named in ``ci`` gets its
interval in the same cell: ``0.812 [0.790, 0.830]``. Numbers print with ``digits`` decimals
(p-values with 3 significant digits), a missing value as ``-`` (``--`` in LaTeX), infinity as
``inf`` (``$\\infty$``).

Example:
    >>> rows = [{"model": "a_1", "n": 3, "ssim": 0.5, "ssim_ci_low": 0.4, "ssim_ci_high": 0.6}]
    >>> print(markdown_table(rows, ["model", "n", "ssim"], ci=leaderboard_ci(["ssim"])))
    | model | n | ssim |
    |:---|---:|---:|
    | a_1 | 3 | 0.500 [0.400, 0.600] |
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medibench.io import atomic_write_text
from medibench.report._csv import write_rows_csv

__all__ = [
    "HEADERS",
    "format_number",
    "interval_ends",
    "latex_table",
    "leaderboard_ci",
    "markdown_table",
    "write_table",
]

#: Column headers of the report's tables (a key not listed is its own header).
HEADERS = {
    "k_mode": "k",
    "n_missing": "missing",
    "n_unscored": "unscored",
    "n_unjudged": "unjudged",
    "n_unpaired": "unpaired",
    "model_a": "model A",
    "model_b": "model B",
    "mean_a": "mean A",
    "mean_b": "mean B",
    "mean_diff": "A - B",
    "rank_biserial": "r_rb",
    "wilcoxon_stat": "W",
    "wilcoxon_p": "p (Wilcoxon)",
    "permutation_p": "p (permutation)",
}

_P_VALUES = {"wilcoxon_p", "permutation_p"}
_COUNTS = {"n", "n_missing", "n_unscored", "n_unjudged", "n_unpaired"}


def leaderboard_ci(names: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{m: (m_ci_low, m_ci_high)}``: where each metric's interval lives in a leaderboard row."""
    return {m: (f"{m}_ci_low", f"{m}_ci_high") for m in names}


def format_number(v: Any, *, digits: int = 3, column: str = "", latex: bool = False) -> str:
    """One cell's text: ``None`` -> ``-``, ints as they are, floats with ``digits`` decimals."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "--" if latex else "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return _latex_escape(str(v)) if latex else str(v)
    if isinstance(v, int) or column in _COUNTS:
        return str(int(v))
    if math.isinf(v):
        inf = r"$\infty$" if latex else "inf"
        return inf if v > 0 else "-" + inf
    if column in _P_VALUES:
        return f"{v:.3g}"
    return f"{v:.{digits}f}"


def interval_ends(
    low: float, high: float, *, digits: int = 3, latex: bool = False
) -> tuple[str, str]:
    """An interval's two ends as :func:`format_number` writes them, with more decimals (up to
    12) where ``digits`` would write two different ends alike: an interval narrower than the
    shown precision never reads ``[x, x]``."""
    for d in range(digits, 13):
        lo, hi = (format_number(v, digits=d, latex=latex) for v in (low, high))
        if lo != hi or low == high:
            break
    return lo, hi


def markdown_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    ci: Mapping[str, tuple[str, str]] | None = None,
    digits: int = 3,
) -> str:
    """A GitHub-flavoured Markdown table; text columns left-aligned, numbers right-aligned."""
    cells = [
        [_cell(r, c, ci, digits, latex=False).replace("|", r"\|") for c in columns] for r in rows
    ]
    align = ["---:" if _numeric(rows, c) else ":---" for c in columns]
    lines = [
        "| " + " | ".join(HEADERS.get(c, c) for c in columns) + " |",
        "|" + "|".join(align) + "|",
        *("| " + " | ".join(row) + " |" for row in cells),
    ]
    return "\n".join(lines)


def latex_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    ci: Mapping[str, tuple[str, str]] | None = None,
    digits: int = 3,
    caption: str | None = None,
    label: str | None = None,
) -> str:
    """A booktabs ``tabular`` (``\\toprule``, ``\\midrule``, ``\\bottomrule``; needs
    ``\\usepackage{booktabs}``), wrapped in a ``table`` with the caption and label when given."""
    spec = "".join("r" if _numeric(rows, c) else "l" for c in columns)
    body = [
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(_latex_escape(HEADERS.get(c, c)) for c in columns) + r" \\",
        r"\midrule",
        *(" & ".join(_cell(r, c, ci, digits, latex=True) for c in columns) + r" \\" for r in rows),
        r"\bottomrule",
        r"\end{tabular}",
    ]
    if caption is None and label is None:
        return "\n".join(body)
    head = [r"\begin{table}[t]", r"\centering"]
    if caption is not None:
        head.append(rf"\caption{{{_latex_escape(caption)}}}")
    if label is not None:
        head.append(rf"\label{{{label}}}")
    return "\n".join([*head, *body, r"\end{table}"])


def write_table(
    rows: Sequence[Mapping[str, Any]],
    stem: str | Path,
    *,
    columns: Sequence[str],
    ci: Mapping[str, tuple[str, str]] | None = None,
    caption: str = "",
    digits: int = 3,
) -> dict[str, Path]:
    """Write ``stem.csv`` and ``stem.json`` (every key, full precision, ``inf`` as a string)
    and ``stem.md``, ``stem.tex`` (the shown ``columns``, intervals merged); return the paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = {
        "csv": stem.with_suffix(".csv"),
        "json": stem.with_suffix(".json"),
        "md": stem.with_suffix(".md"),
        "tex": stem.with_suffix(".tex"),
    }
    if rows:
        write_rows_csv([dict(r) for r in rows], out["csv"])
    else:
        atomic_write_text(out["csv"], ",".join(columns) + "\n")
    payload = {
        "caption": caption,
        "rows": [{k: _json_value(v) for k, v in r.items()} for r in rows],
    }
    atomic_write_text(out["json"], json.dumps(payload, indent=1, allow_nan=False) + "\n")
    md = markdown_table(rows, columns, ci=ci, digits=digits)
    atomic_write_text(out["md"], (f"{caption}\n\n" if caption else "") + md + "\n")
    atomic_write_text(
        out["tex"], latex_table(rows, columns, ci=ci, digits=digits, caption=caption or None) + "\n"
    )
    return out


def _cell(row, column, ci, digits, *, latex: bool) -> str:
    text = format_number(row.get(column), digits=digits, column=column, latex=latex)
    if ci and column in ci and row.get(column) is not None:
        low, high = (row.get(k) for k in ci[column])
        if low is not None and high is not None and not (math.isinf(low) and low == high):
            lo, hi = interval_ends(low, high, digits=digits, latex=latex)
            text += f" [{lo}, {hi}]"
    return text


def _numeric(rows, column) -> bool:
    present = [r.get(column) for r in rows if r.get(column) is not None]
    return bool(present) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in present
    )


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v
