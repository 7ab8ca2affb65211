"""MieDB-style construction of benchmark and training triplets from segmentation datasets.

``build(perspective, "SOURCE.yaml", "OUT")`` reads a source description (docs/build.md), slices
its images and label maps, makes perception overlays, transformation pairs or modification
counterfactuals (inpainting with rejection sampling), removes near-duplicates, splits by the
source's rule, and writes a native dataset, an attempt log, a quality report and exports
(MieDB layout, Hugging Face Parquet, OmniGen2 JSONL). Builds resume where they stopped and run
as Ray tasks with ``executor="ray"``.

Example:
    >>> result = build("perception", "SOURCE.yaml", "out/perception")   # doctest: +SKIP
    >>> result.samples, result.filters                                     # doctest: +SKIP
"""

from medibench.build._engine import PERSPECTIVES, BuildResult, build, finalize
from medibench.build._errors import BuildError
from medibench.build._exports import EXPORTS, write_omnigen2
from medibench.build._inpaint import ClassicalInpainter, load_inpainter
from medibench.build._items import Slice, bin_size, item_slices
from medibench.build._modification import restore_background
from medibench.build._operators import OPERATORS
from medibench.build._post import assign_splits, near_duplicates, phash
from medibench.build._report import quality, write_report
from medibench.build._source import ItemSpec, SourceSpec, SplitRule, read_source, source_from_dict
from medibench.build._verify import StatisticsVerifier, Verdict, load_verifier

__all__ = [
    "EXPORTS",
    "OPERATORS",
    "PERSPECTIVES",
    "BuildError",
    "BuildResult",
    "ClassicalInpainter",
    "ItemSpec",
    "Slice",
    "SourceSpec",
    "SplitRule",
    "StatisticsVerifier",
    "Verdict",
    "assign_splits",
    "bin_size",
    "build",
    "finalize",
    "item_slices",
    "load_inpainter",
    "load_verifier",
    "near_duplicates",
    "phash",
    "quality",
    "read_source",
    "restore_background",
    "source_from_dict",
    "write_omnigen2",
    "write_report",
]
