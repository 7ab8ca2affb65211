"""medibench: evaluate text-guided medical image editing by paper and corrected protocols."""

from medibench.samples import OVERLAY_COLORS, Perspective, Prediction, RecordError, Sample, Score

__version__ = "0.1.0"

__all__ = [
    "OVERLAY_COLORS",
    "Perspective",
    "Prediction",
    "RecordError",
    "Sample",
    "Score",
    "__version__",
]
