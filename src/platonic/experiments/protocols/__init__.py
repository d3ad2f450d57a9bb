"""The experiment protocols, each a runner of the registry (`experiments.registry.PROTOCOLS`).

- `paper`: the Platonic Task Arithmetic paper's protocols on the fast path (addition, negation,
  generalisation, the strength sweep) and the gradient-ascent baseline;
- `weight_space`: its weight-space baselines on the same cells (task arithmetic within one model,
  transport between models of one architecture);
- `adapter_cells`: the adapter route beside the closed form on seeded cells;
- `orthoreg_sources`: OrthoReg fine-tunes as descriptor sources (beyond both papers);
- `task_arithmetic` (+ its report): the OrthoReg paper's benchmark, fine-tuning flavours x OrthoReg.
"""

from .adapter_cells import addition_adapter, fit_adapted, negation_adapter
from .orthoreg_sources import orthoreg_sources
from .paper import (
    Operators,
    accuracies,
    addition,
    alpha_sweep,
    cell_record,
    generalization,
    negation,
    negation_gradient_ascent,
)
from .task_arithmetic import ALPHAS, FLAVOURS, run_task_arithmetic
from .weight_space import WEIGHT_ALPHAS, WEIGHT_SPACE_VAL_SIZE, same_architecture_pairs, weight_space

__all__ = ["ALPHAS", "FLAVOURS", "WEIGHT_ALPHAS", "WEIGHT_SPACE_VAL_SIZE", "Operators", "accuracies", "addition",
           "addition_adapter", "alpha_sweep", "cell_record", "fit_adapted", "generalization", "negation",
           "negation_adapter", "negation_gradient_ascent", "orthoreg_sources", "run_task_arithmetic",
           "same_architecture_pairs", "weight_space"]
