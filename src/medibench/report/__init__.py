"""Reports: protocol-aware aggregation of score records, statistics, tables, plots and HTML.

``build_report(run_dir, out_dir)`` writes the whole report folder (``index.html``, tables in
CSV/JSON/Markdown/LaTeX, plots, the sample browser) from a run store; the pieces are usable on
their own: :func:`summarize` and :func:`leaderboard` (summary rows with bootstrap CIs and missing
counts), :func:`comparisons` and :func:`compare_models` (paired Wilcoxon and permutation tests
with effect sizes), :func:`markdown_table` and :func:`latex_table`, and the statistics helpers
(:func:`bootstrap_ci`, :func:`hierarchical_bootstrap_ci`, :func:`paired_wilcoxon`,
:func:`pass_rate`).
"""

from medibench.report._aggregate import per_sample_values, sample_field, summarize
from medibench.report._build import build_report
from medibench.report._console import format_value, summary_tables
from medibench.report._csv import write_json, write_rows_csv, write_rows_json
from medibench.report._formats import latex_table, markdown_table, write_table
from medibench.report._tables import comparisons, leaderboard, per_model_values
from medibench.stats import (  # re-exported: the report's statistics live in medibench.stats
    PassRate,
    bootstrap_ci,
    compare_models,
    hierarchical_bootstrap_ci,
    macro_mean,
    paired_permutation_test,
    paired_wilcoxon,
    pass_rate,
    rank_biserial,
)

__all__ = [
    "PassRate",
    "bootstrap_ci",
    "build_report",
    "compare_models",
    "comparisons",
    "format_value",
    "hierarchical_bootstrap_ci",
    "latex_table",
    "leaderboard",
    "macro_mean",
    "markdown_table",
    "paired_permutation_test",
    "paired_wilcoxon",
    "pass_rate",
    "per_model_values",
    "per_sample_values",
    "rank_biserial",
    "sample_field",
    "summarize",
    "summary_tables",
    "write_rows_csv",
    "write_json",
    "write_rows_json",
    "write_table",
]
