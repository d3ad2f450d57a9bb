"""Builders shared by the tests."""

import torch

from platonic import Descriptor, ProbeGrid, Provenance


def make_grid(task="toy", n=6, m=3, seed=0, prompts=None):
    probes = torch.randint(0, 256, (n, 3, 8, 8), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)
    prompts = prompts or [f"a photo of a {task} class {j}." for j in range(m)]
    return ProbeGrid.from_probes(task, prompts, probes)


def make_descriptor(grid=None, seed=0, source="model-a"):
    grid = grid or make_grid()
    matrix = torch.randn(grid.shape, generator=torch.Generator().manual_seed(seed))
    return Descriptor(matrix, grid, Provenance(source=source, finetune="test"))
