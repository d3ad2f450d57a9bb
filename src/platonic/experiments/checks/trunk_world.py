"""The trunk world's acceptance figures, measured by the experiment engine like the image world's.

The built trunk world is read by `experiments.setups.trunk_world_parts` (its three open_clip models, the image
world's eight tasks, two controls, its last-stage and LoRA sources); every figure comes from the image world's code
(`checks.world.measure_parts`, `summarise`, `checks`). `trunk_world_report(path)` writes report.json and report.md
into the trunk world's directory (once; cached).
"""

from __future__ import annotations

from pathlib import Path

from ..setups.trunk_world import trunk_world_parts
from .world import fit_iterations, measure_parts, write_report


def trunk_world_report(path, progress: bool = False, force: bool = False, diagnostics: bool = True) -> dict:
    """The trunk world's report (measured once, then read from report.json); both source kinds are built first."""
    from ...world.image.data import CONTROL_NAMES, TASK_NAMES
    from ...world.image.trunkworld.build import ensure_sources
    from .report import markdown_report

    def measure() -> dict:
        ensure_sources(path, progress=progress)  # the report reads both source kinds
        return measure_parts(trunk_world_parts(Path(path)), progress=progress, diagnostics=diagnostics,
                             fit_iterations=fit_iterations(path))

    def markdown(report: dict) -> str:
        return markdown_report(report, TASK_NAMES, CONTROL_NAMES, title="platonic trunk world report")

    return write_report(path, measure, markdown, force=force)
