"""platonic: move fine-tuned skills between different multimodal dual encoders.

Core objects (method.md §1.1-1.3):

- `Descriptor`, `ProbeGrid`, `Provenance`, `Composition`, `mean`: universal task descriptors and their algebra;
- `solve`, `RidgeSolver`, `relative_residual`, `head_design_matrix`: the closed-form two-sided ridge solve;
- `Operator`, `OperatorBank`: solved edits for one target, composed by signed sums;
- `ProjectionParameter`, `LinearSite`, `HeadAffineSite`, `AppendedLinearSite`, `fold`, `unfold`:
  where an edit lands and folding it in;
- `load_model`, `measure`, `solve_bank`, `apply`, `save_model`: the same on open_clip / transformers models;
- `adapt`, `Adapter`, `AdaptConfig`: the adapter route, a peft LoRA fitted to the descriptors (method.md §1.4).
"""

from ._version import __version__  # noqa: F401 (platonic.__version__)

from .adapter import AdaptConfig, Adapter, adapt
from .bank import Operator, OperatorBank, Term
from .descriptor import Composition, Descriptor, ProbeGrid, Provenance, digest_probes, mean
from .edit import (
    AppendedLinearSite,
    EditSite,
    FoldRecord,
    HeadAffineSite,
    LinearSite,
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
    PlatonicError,
)
from .measurement import measure
from .models import load_model
from .solve import RidgeSolver, head_design_matrix, relative_residual, solve, solve_reference
from .transfer import apply, save_model, solve_bank

__all__ = [
    "AppendedLinearSite", "ArtifactError", "Composition", "Descriptor", "EditSite", "EditSiteError",
    "FingerprintMismatchError", "FoldRecord", "GridMismatchError", "HeadAffineSite", "InvalidInputError",
    "LinearSite", "Operator", "OperatorBank", "PlatonicError", "ProbeGrid", "ProjectionParameter",
    "Provenance", "RidgeSolver", "Term", "digest_probes", "fold", "head_design_matrix", "mean",
    "relative_residual", "solve", "solve_reference", "unfold", "unfold_by_inversion",
    "apply", "load_model", "measure", "save_model", "solve_bank", "AdaptConfig", "Adapter", "adapt",
]
