"""Report panels: sections that a stage other than scoring contributes to the HTML report.

A panel is ``{"id", "title", "tables": [{"title", "columns", "rows", "notes"}], "figures":
[{"title", "svg"}]}``: plain data, rendered by the page template after the protocol sections.
Each provider is a ``"module:function"`` taking the open run store and the run folder and
returning a panel, or ``None`` when the run has nothing of its kind; providers import lazily,
so a run without model editing never imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medibench.registry import import_object

__all__ = ["PANEL_PROVIDERS", "collect_panels"]

#: The stages with a report panel, in page order.
PANEL_PROVIDERS = (
    "medibench.calibration._report:calibration_panel",  # medibench calibration score --run
    "medibench.prompt_tuning._tables:grid_panel",  # medibench calibration grid --run
    "medibench.knowledge_edit._report:editing_panel",  # medibench edit run
    "medibench.benchmarks.medgen.controls:pairing_panel",  # medibench medgen delta
)


def collect_panels(store: Any, run_dir: Path) -> list[dict[str, Any]]:
    """Every provider's panel for this run, in :data:`PANEL_PROVIDERS` order."""
    panels = []
    for spec in PANEL_PROVIDERS:
        panel = import_object(spec)(store, run_dir)
        if panel:
            panels.append({"tables": [], "figures": [], **panel})
    return panels
