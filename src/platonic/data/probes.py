"""The paper's probe draw (method.md §1.6): 30 unlabeled train inputs per class, seed 42, no quota."""

from __future__ import annotations

import torch

PROBES_PER_CLASS = 30
PROBE_SEED = 42


def probe_indices(n_train: int, n_classes: int, per_class: int = PROBES_PER_CLASS, seed: int = PROBE_SEED) -> torch.Tensor:
    """(N,) indices into a train split: the first min(n_train, per_class * n_classes) entries of a
    random permutation of range(n_train) seeded with `seed` (no per-class quota)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randperm(n_train, generator=g)[: min(n_train, per_class * n_classes)]
