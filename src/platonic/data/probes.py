"""The paper's draws (method.md §1.6): probes and control images, both seeded with 42.

- Probes: 30 unlabeled train inputs per class, the first 30 x (number of classes) entries of one random
  permutation of the whole train split (no per-class quota); the reference code reads them in sorted
  index order (`probe_draw`).
- Controls: 10 images per class from the test split; for each class in label order, the first 10 of a
  permutation of that class's images, drawn from one generator shared across classes (pta/data/controls.py).
"""

from __future__ import annotations

import torch

PROBES_PER_CLASS = 30
PROBE_SEED = 42
CONTROL_PER_CLASS = 10
CONTROL_SEED = 42


def probe_indices(n_train: int, n_classes: int, per_class: int = PROBES_PER_CLASS, seed: int = PROBE_SEED) -> torch.Tensor:
    """(N,) indices into a train split: the first min(n_train, per_class * n_classes) entries of a
    random permutation of range(n_train) seeded with `seed` (no per-class quota)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randperm(n_train, generator=g)[: min(n_train, per_class * n_classes)]


def probe_draw(n_train: int, n_classes: int, per_class: int = PROBES_PER_CLASS, seed: int = PROBE_SEED) -> torch.Tensor:
    """`probe_indices` in ascending order: the reference code's probe bundle (the same set, its row order)."""
    return probe_indices(n_train, n_classes, per_class, seed).sort().values


def control_indices(labels: torch.Tensor, n_classes: int, per_class: int | None = CONTROL_PER_CLASS,
                    seed: int = CONTROL_SEED) -> torch.Tensor:
    """(n,) indices into a labelled split (labels (L,) int): for c = 0 .. n_classes - 1, the first
    `per_class` of a permutation of class c's positions, one generator seeded with `seed` for all
    classes; grouped by class. per_class None: every image, in split order."""
    labels = torch.as_tensor(labels)
    if per_class is None:
        return torch.arange(len(labels))
    g = torch.Generator().manual_seed(seed)
    picks = []
    for c in range(n_classes):
        candidates = (labels == c).nonzero().flatten()
        picks.append(candidates[torch.randperm(len(candidates), generator=g)[:per_class]])
    return torch.cat(picks) if picks else torch.empty(0, dtype=torch.long)


def first_per_class(labels: torch.Tensor, n_classes: int, per_class: int | None) -> torch.Tensor:
    """(n,) indices of the first `per_class` images of each class, in split order (None: all of them)."""
    labels = torch.as_tensor(labels)
    if per_class is None:
        return torch.arange(len(labels))
    keep = torch.zeros(len(labels), dtype=torch.bool)
    for c in range(n_classes):
        keep[(labels == c).nonzero().flatten()[:per_class]] = True
    return keep.nonzero().flatten()
