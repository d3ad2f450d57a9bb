"""The world's in-memory splits: images (n, 3, S, S) uint8 with labels (n,) int64, and a task's three
splits with its probe indices."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .tasks import Task

CANONICAL_SIZE = 32  # side of every world image (3, S, S) uint8; models resize bilinearly to their own input


# -- splits ---------------------------------------------------------------------------------------

@dataclass
class ImageSplit:
    """images (n, 3, S, S) uint8; labels (n,) int64."""

    images: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def subset(self, idx) -> "ImageSplit":
        return ImageSplit(self.images[idx], self.labels[idx])


@dataclass
class ImageTaskData:
    task: Task
    train: ImageSplit
    val: ImageSplit
    test: ImageSplit
    probe_index: torch.Tensor = field(default=None)  # (N,) indices into train

    @property
    def probes(self) -> torch.Tensor:
        """Canonical probes (N, 3, S, S) uint8: 30 x classes train images, seed 42."""
        return self.train.images[self.probe_index]
