"""The worlds' acceptance checks, measured by the engine: does a built world behave like the paper's models?

- `world`: per model and source kind, zero-shot and fine-tuned accuracy, descriptor agreement, the
  oracle's recovery and cross-model transfer, summarised and checked (`world_report`);
- `diagnose`: why the closed form works or fails there (linear probe, best linear map, locality, ...);
- `report`: the report as Markdown; `audio_world`, `trunk_world`: the same figures on the audio world and on the
  image world on pretrained trunks.
"""

from .audio_world import audio_world_report
from .diagnose import FIT_ITERATIONS, best_linear_map, diagnose, linear_probe, participation_ratio, prompt_leak
from .report import diagnostics_table, markdown_report
from .trunk_world import trunk_world_checks, trunk_world_report
from .world import KINDS, REPORT_VERSION, checks, measure_parts, measure_world, summarise, world_report, write_report

__all__ = ["FIT_ITERATIONS", "KINDS", "REPORT_VERSION", "audio_world_report", "best_linear_map", "checks", "diagnose",
           "diagnostics_table", "linear_probe", "markdown_report", "measure_parts", "measure_world", "participation_ratio",
           "prompt_leak", "summarise", "trunk_world_checks", "trunk_world_report", "world_report", "write_report"]
