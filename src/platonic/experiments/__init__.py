"""The paper's experiment protocols, the fast path they run on, and their reports."""

from .protocols import addition, alpha_sweep, generalization, negation
from .registry import PROTOCOLS, Protocol, Registry, SolveSettings
from .run import run_experiments
from .setup import EvalSet, ExperimentSetup, TaskSpec

__all__ = ["PROTOCOLS", "EvalSet", "ExperimentSetup", "Protocol", "Registry", "SolveSettings", "TaskSpec", "addition",
           "alpha_sweep", "generalization", "negation", "run_experiments"]
