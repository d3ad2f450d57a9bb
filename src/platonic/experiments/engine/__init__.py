"""The experiment engine: what a protocol runs on and how it runs fast.

- `setup`: `ExperimentSetup` (models, tasks with probes and test / val splits, controls, descriptors,
  baselines), `EvalSet`, `TaskSpec`, `measure_on_grids` / `MeasuredGrids` (descriptors on every grid);
- `fastpath`: `FeatureStore` (features cached once per (model, data set); every closed-form cell a sum
  of cached embedding changes), `accuracy_end_to_end`;
- `diagnostics`: descriptor cosines across models and tasks (the paper's Figure 1);
- `finetune_cache`, `sources`: fine-tunes kept as task vectors on disk (`cached_task_vector`,
  `CachedSources`), shared by the weight-space experiments;
- `weight_space`: the parts of weight-space task arithmetic those experiments share;
- `adapter_cache`: fitted adapters on disk (`cached_adapt`); `jobs`: the independent jobs of a run that a
  launch of several processes spreads (`phase_one`).
"""

from .adapter_cache import cached_adapt
from .diagnostics import descriptor_cosines
from .fastpath import FeatureStore, accuracy_end_to_end, single_thread
from .finetune_cache import cached_finetune, cached_task_vector, changed_deltas, finetuned_model
from .jobs import phase_one
from .setup import EvalSet, ExperimentSetup, GridDiagnostics, MeasuredGrids, TaskSpec, measure_on_grids, torch_threads
from .sources import CachedSources
from .weight_space import Features, TaskVectorRecipe, Variants, aligned, check_lambdas, val_subset

__all__ = ["CachedSources", "cached_adapt", "phase_one", "EvalSet", "ExperimentSetup", "Features", "FeatureStore", "GridDiagnostics",
           "MeasuredGrids", "TaskSpec", "TaskVectorRecipe", "Variants", "accuracy_end_to_end", "aligned",
           "cached_finetune", "cached_task_vector", "changed_deltas", "check_lambdas", "descriptor_cosines",
           "finetuned_model", "measure_on_grids", "single_thread", "torch_threads", "val_subset"]
