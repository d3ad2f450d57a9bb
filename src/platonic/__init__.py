"""platonic: move fine-tuned skills between different multimodal dual encoders.

Core objects (method.md §1.1-1.3):

- `Descriptor`, `ProbeGrid`, `Provenance`, `Composition`, `mean`: universal task descriptors and their algebra;
- `solve`, `RidgeSolver`, `relative_residual`, `head_design_matrix`: the closed-form two-sided ridge solve;
  `SolveConfig`: how it is solved (the paper's, anchored, rank-capped), for the API, experiments, recipes, CLI;
- `Operator`, `OperatorBank`: solved edits for one target, composed by signed sums;
- `ProjectionParameter`, `LinearSite`, `HeadAffineSite`, `AppendedLinearSite`, `fold`, `unfold`:
  where an edit lands and folding it in;
- `load_model`, `measure`, `solve_bank`, `apply`, `save_model`: the same on open_clip / transformers models;
- `adapt`, `Adapter`, `AdaptConfig`: the adapter route, a peft LoRA fitted to the descriptors (method.md §1.4);
- `TaskVector`, `finetune`, `FinetuneConfig`: weight-space task arithmetic and fine-tuning (with OrthoReg);
- `run_experiments`, `ExperimentSetup`: the paper's protocols (loaded on first use: the experiment
  engine sits above the library and is imported only when asked for).

Every error platonic raises derives from `PlatonicError`.

Every public name is imported from its module on first access (module `__getattr__`), so that importing
`platonic.errors` (the command line does, to answer `--help`) loads neither torch nor the backends.
"""

import sys
import types

from ._version import __version__
from .lazy import lazy_exports

# public name -> the module that defines it, imported on first access
_LAZY = {
    **dict.fromkeys(("AdaptConfig", "Adapter", "adapt"), "adapter"),
    **dict.fromkeys(("Operator", "OperatorBank", "Term"), "bank"),
    **dict.fromkeys(("Composition", "Descriptor", "ProbeGrid", "Provenance", "digest_probes", "mean"), "descriptor"),
    **dict.fromkeys(("AppendedLinearSite", "EditSite", "FoldRecord", "HeadAffineSite", "LinearSite", "ProbeEmbeddings",
                     "ProjectionParameter", "fold", "unfold", "unfold_by_inversion"), "edit"),
    **dict.fromkeys(("ArtifactError", "EditSiteError", "FingerprintMismatchError", "GridMismatchError",
                     "InvalidInputError", "InvalidOperationError", "PlatonicError", "ZeroDescriptorWarning"), "errors"),
    **dict.fromkeys(("FinetuneConfig", "finetune"), "finetuning"),
    "measure": "measurement",
    **dict.fromkeys(("DualEncoder", "load_model"), "models"),
    **dict.fromkeys(("RidgeSolver", "head_design_matrix", "relative_residual", "solve", "solve_reference"), "solve"),
    "SolveConfig": "solve_config",
    "TaskVector": "task_vector",
    **dict.fromkeys(("apply", "save_model", "solve_bank"), "transfer"),
}
_FROM_EXPERIMENTS = ("ExperimentSetup", "run_experiments")

__all__ = ["__version__", *_LAZY, *_FROM_EXPERIMENTS]


_library, _names = lazy_exports(__name__, _LAZY)


def __getattr__(name: str):
    """A public name, imported from its module on first access (`run_experiments` and `ExperimentSetup`
    from the experiment engine, which sits above the library), then kept in the package's namespace."""
    if name in _FROM_EXPERIMENTS:
        from . import experiments

        return getattr(experiments, name)
    return _library(name)


def __dir__() -> list[str]:
    return sorted(set(_names()) | set(_FROM_EXPERIMENTS))


class _Facade(types.ModuleType):
    """The package's module type. Importing a submodule binds it on its package, so the module
    `platonic.solve` would hide the function `platonic.solve`: a public name keeps its public value."""

    def __setattr__(self, name: str, value) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade
