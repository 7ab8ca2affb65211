"""Reports: protocol-aware aggregation of score records, statistics, tables."""

from medibench.report._aggregate import per_sample_values, sample_field, summarize
from medibench.report._csv import write_rows_csv
from medibench.report._stats import (
    PassRate,
    bootstrap_ci,
    hierarchical_bootstrap_ci,
    macro_mean,
    paired_wilcoxon,
    pass_rate,
)

__all__ = [
    "PassRate",
    "bootstrap_ci",
    "hierarchical_bootstrap_ci",
    "macro_mean",
    "paired_wilcoxon",
    "pass_rate",
    "per_sample_values",
    "sample_field",
    "summarize",
    "write_rows_csv",
]
