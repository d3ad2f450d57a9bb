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
"""

from ._version import __version__
from .adapter import AdaptConfig, Adapter, adapt
from .bank import Operator, OperatorBank, Term
from .descriptor import Composition, Descriptor, ProbeGrid, Provenance, digest_probes, mean
from .edit import (
    AppendedLinearSite,
    EditSite,
    FoldRecord,
    HeadAffineSite,
    LinearSite,
    ProbeEmbeddings,
    ProjectionParameter,
    fold,
    unfold,
    unfold_by_inversion,
)
from .errors import (
    ArtifactError,
    EditSiteError,
    FingerprintMismatchError,
    GridMismatchError,
    InvalidInputError,
    InvalidOperationError,
    PlatonicError,
    ZeroDescriptorWarning,
)
from .finetuning import FinetuneConfig, finetune
from .measurement import measure
from .models import DualEncoder, load_model
from .solve import RidgeSolver, head_design_matrix, relative_residual, solve, solve_reference
from .solve_config import SolveConfig
from .task_vector import TaskVector
from .transfer import apply, save_model, solve_bank

_FROM_EXPERIMENTS = ("ExperimentSetup", "run_experiments")

__all__ = [
    "AppendedLinearSite", "ArtifactError", "Composition", "Descriptor", "EditSite", "EditSiteError",
    "FingerprintMismatchError", "FoldRecord", "GridMismatchError", "HeadAffineSite", "InvalidInputError",
    "InvalidOperationError", "LinearSite", "Operator", "OperatorBank", "PlatonicError", "ProbeEmbeddings", "ProbeGrid",
    "ProjectionParameter", "Provenance", "RidgeSolver", "SolveConfig", "Term", "ZeroDescriptorWarning", "__version__", "digest_probes",
    "fold", "head_design_matrix", "mean", "relative_residual", "solve", "solve_reference", "unfold", "unfold_by_inversion",
    "DualEncoder", "apply", "load_model", "measure", "save_model", "solve_bank", "AdaptConfig", "Adapter", "adapt",
    "FinetuneConfig", "TaskVector", "finetune", *_FROM_EXPERIMENTS,
]


def __getattr__(name: str):
    """`platonic.run_experiments` and `platonic.ExperimentSetup`, imported on first access."""
    if name in _FROM_EXPERIMENTS:
        from . import experiments

        return getattr(experiments, name)
    raise AttributeError(f"module 'platonic' has no attribute {name!r}")  # the protocol of module __getattr__


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FROM_EXPERIMENTS))
