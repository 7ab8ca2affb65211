"""Report panels: sections that a stage other than scoring contributes to the HTML report.

A panel is ``{"id", "title", "tables": [{"title", "columns", "rows", "notes"}], "figures":
[{"title", "svg"}]}``: plain data, rendered by the page template after the protocol sections.
A figure may instead hold ``"parts": [{"title", "svg"}]``, drawn side by side (before and after
a calibrator), and ``"data"``: ``{name: value}`` set as the figure's ``data-*`` attributes (what a
page or a test reads, such as a plotted point).
Each provider is a ``"module:function"`` taking the open run store and the run folder and
returning a panel, or ``None`` when the run has nothing of its kind; providers import lazily,
so a run without model editing never imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medibench.registry import import_object

__all__ = ["FOLDER_REPORTS", "PANEL_PROVIDERS", "collect_panels", "folder_report"]

#: The stages with a report panel, in page order.
PANEL_PROVIDERS = (
    "medibench.calibration._report:calibration_panel",  # medibench calibration score --run
    "medibench.prompt_tuning._tables:grid_panel",  # medibench calibration grid (its --out)
    "medibench.knowledge_edit._report:editing_panel",  # medibench edit run
    "medibench.knowledge_edit._report:geometry_panel",  # medibench edit analyze
    "medibench.benchmarks.medgen.controls:pairing_panel",  # medibench medgen delta
    "medibench.train._report:training_panel",  # medibench train (its folder, its eval runs)
    "medibench.runs._compare:compared_panel",  # medibench compare --out
)


#: Folders other than runs that ``medibench report FOLDER`` reports on: each ``"module:function"``
#: takes ``(folder, out)`` and returns the page it wrote, or ``None`` when the folder is not its.
FOLDER_REPORTS = ("medibench.train._report:write_training_report",)  # medibench train's folder


def folder_report(folder: Path, out: Path | None) -> Path | None:
    """The page of the first :data:`FOLDER_REPORTS` writer that takes ``folder``, or ``None``."""
    for spec in FOLDER_REPORTS:
        page = import_object(spec)(folder, out)
        if page is not None:
            return page
    return None


def collect_panels(store: Any, run_dir: Path) -> list[dict[str, Any]]:
    """Every provider's panel for this run, in :data:`PANEL_PROVIDERS` order."""
    panels = []
    for spec in PANEL_PROVIDERS:
        panel = import_object(spec)(store, run_dir)
        if panel:
            panels.append({"tables": [], "figures": [], **panel})
    return panels
