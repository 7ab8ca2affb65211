"""Reports: protocol-aware aggregation of score records, statistics, tables."""

from medibench.report._aggregate import per_sample_values, sample_field, summarize
from medibench.report._csv import write_rows_csv

__all__ = ["per_sample_values", "sample_field", "summarize", "write_rows_csv"]
