"""Statistics in one place: bootstrap intervals (plain and hierarchical), pass rates, paired
tests and effect sizes, and agreement coefficients.

Pure functions on numbers, used by the reports, the judges' agreement tables and the coming
calibration stage; a missing value is never a 0 (each function refuses it or leaves it out and
counts it).

* :func:`bootstrap_ci`, :func:`hierarchical_bootstrap_ci`, :func:`macro_mean`, :func:`pass_rate`
* :func:`paired_wilcoxon`, :func:`paired_permutation_test`, :func:`rank_biserial`,
  :func:`compare_models`, :func:`paired_values`
* :func:`pearson`, :func:`spearman`, :func:`kendall`, :func:`icc_2_1`, :func:`paired_estimate`
* :func:`correlation` (with its p-value), :func:`correlation_ci` (resampling models or samples
  within models), :func:`correlation_rows`, :func:`linear_fit`
* :func:`auroc`, :func:`auroc_ci` (separation of two kinds of points by a score),
  :func:`linear_cka`, :func:`linear_cka_ci` (how much a representation changed)
* :func:`check_edges`, :func:`assign_bins`, :func:`bin_labels` (bins of a property, the last
  closed) and :func:`trend_test` (Spearman's rho of a value with the property, its p-value)
"""

from medibench.stats._agreement import (
    Estimate,
    icc_2_1,
    icc_or_nan,
    kendall,
    paired_estimate,
    pearson,
    spearman,
)
from medibench.stats._bins import assign_bins, bin_labels, check_edges, trend_test
from medibench.stats._bootstrap import (
    BOOTSTRAP_MAX_ENTRIES,
    PassRate,
    bootstrap_ci,
    bootstrap_indices,
    hierarchical_bootstrap_ci,
    interval_text,
    macro_mean,
    paired_wilcoxon,
    pass_rate,
    percentile_interval,
)
from medibench.stats._correlation import (
    EXACT_MAX_N,
    Correlation,
    CorrelationMethod,
    LinearFit,
    PValueMethod,
    correlation,
    correlation_ci,
    correlation_rows,
    linear_fit,
)
from medibench.stats._geometry import auroc, auroc_ci, linear_cka, linear_cka_ci
from medibench.stats._paired import (
    compare_models,
    paired_permutation_test,
    paired_values,
    rank_biserial,
)

__all__ = [
    "BOOTSTRAP_MAX_ENTRIES",
    "EXACT_MAX_N",
    "Correlation",
    "CorrelationMethod",
    "Estimate",
    "LinearFit",
    "PValueMethod",
    "PassRate",
    "assign_bins",
    "auroc",
    "auroc_ci",
    "bin_labels",
    "bootstrap_ci",
    "bootstrap_indices",
    "check_edges",
    "compare_models",
    "correlation",
    "correlation_ci",
    "correlation_rows",
    "hierarchical_bootstrap_ci",
    "icc_2_1",
    "icc_or_nan",
    "kendall",
    "linear_cka",
    "linear_cka_ci",
    "linear_fit",
    "macro_mean",
    "paired_estimate",
    "paired_permutation_test",
    "paired_values",
    "paired_wilcoxon",
    "pass_rate",
    "interval_text",
    "percentile_interval",
    "pearson",
    "rank_biserial",
    "spearman",
    "trend_test",
]
