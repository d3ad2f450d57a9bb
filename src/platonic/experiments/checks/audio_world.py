"""The audio world's acceptance figures, measured by the experiment engine like the image world's.

The built audio world is read by `experiments.setups.audio_world_parts` (its four models, nine tasks,
two controls and fine-tuned sources), and every figure comes from the image world's code
(`checks.world.measure_parts`, `summarise`, `checks`): zero-shot and
fine-tuned accuracy, descriptor agreement (same-task cross-model vs cross-task cosine), the oracle
(own descriptor, alpha 1) and its recovery, cross-model transfer at alpha 0.5, the diagnostics.

`audio_world_report(path)` writes report.json and report.md into the audio world's directory (once; cached).
"""

from __future__ import annotations

from ..setups.audio_world import audio_world_parts
from .world import measure_parts, write_report


def audio_world_report(path, progress: bool = False, force: bool = False, diagnostics: bool = True) -> dict:
    """The audio world's report (measured once, then read from report.json); writes report.json and report.md.

    diagnostics=False (the tests' tiny world) leaves out the image world's diagnostics (linear probe, best
    linear map, locality, participation ratio; minutes even on the tiny profile) and the checks that read them.
    """
    from ...world.audio.build import ensure_audio_sources
    from ...world.audio.tasks import CONTROL_NAMES, TASK_NAMES
    from .report import markdown_report

    def markdown(report: dict) -> str:
        return markdown_report(report, TASK_NAMES, CONTROL_NAMES, title="platonic audio world report")

    def measure() -> dict:
        ensure_audio_sources(path, progress=progress)  # the report reads both source kinds
        return measure_parts(audio_world_parts(path), progress=progress, diagnostics=diagnostics)

    return write_report(path, measure, markdown, force=force)
