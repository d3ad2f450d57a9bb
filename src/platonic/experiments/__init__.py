"""The paper's experiment protocols, the engine they run on, and their reports.

- `engine/`: setups' types, the fast path, the fine-tune cache (the parts every protocol shares);
- `setups/`: what experiments run on (the worlds, the toy, YAML files and options; `load_setup`);
- `protocols/`: the runners; `registry`: one entry per experiment (`PROTOCOLS`);
- `checks/`: the worlds' acceptance reports;
- `run` (`run_experiments`), `report` / `tables` / `plots` (results.json, tables.md, PNGs), `command`
  (`platonic experiment` and `platonic demo` as requests checked against the registries).
"""

from .engine import EvalSet, ExperimentSetup, TaskSpec
from .protocols import addition, alpha_sweep, generalization, negation
from .registry import PROTOCOLS, Protocol, Registry
from .run import run_experiments

__all__ = ["PROTOCOLS", "EvalSet", "ExperimentSetup", "Protocol", "Registry", "TaskSpec", "addition", "alpha_sweep",
           "generalization", "negation", "run_experiments"]
