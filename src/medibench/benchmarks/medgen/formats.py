"""Which of MedGEN-Bench's three formats a dataset spec loads, and loading them together.

``medgen:DIR`` (the prepared folder or the Parquet release) is the image-editing records, as
before. A path naming a format's own file or folder loads that format:

==============================================  ==========================================
spec                                            records
==============================================  ==========================================
``medgen:DIR/vqa.jsonl``                        VQA (``DIR/gen.jsonl``: generation,
                                                ``DIR/edit.jsonl``: editing)
``medgen:ROOT/parquet/vqa``                     the release's VQA config
``medgen:ROOT/parquet/multimodal_generation``   its generation config
==============================================  ==========================================

:func:`~medibench.benchmarks.medgen.dataset.read_medgen` also takes ``formats=("edit", "vqa",
"gen")`` (or ``"all"``) to load several into one dataset. Parquet images are written to the
release's cache folder as the editing records' are (:mod:`.parquet`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medibench.benchmarks.medgen._dataset import MedGenDataset
from medibench.benchmarks.medgen._formats import FORMATS, normalise_formats, select_formats

__all__ = ["FORMATS", "normalise_formats", "read_formats", "select_formats"]


def read_formats(root: Path, formats: Sequence[str], name: str = "medgen") -> MedGenDataset:
    """The samples of ``formats`` from the prepared folder or Parquet release at ``root``.

    Raises:
        DatasetError: none of the formats' files is there, or no sample is left.
    """
    return MedGenDataset.from_formats(root, formats, name)
