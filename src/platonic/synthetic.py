"""A synthetic two-model world for the foundation demo (until the embedded world lands).

Both models observe one latent space R^k of C class concepts. Model m has a text tower
g_m(c) = Q_m mu_c and an image tower z_m(x) = W2_m tanh(W1_m x) whose last Linear W2_m is fitted
("pre-trained") so that z_m(x) ~ Q_m x. A "fine-tune" is the same latent edit for every model:
x -> (I + beta P_C) x with P_C the projection onto the class centroids' span, which separates the
classes; each model sees it through its own towers. The demo measures the source's descriptor,
solves it on the target (different widths and weights), folds it into the target's last Linear and
compares zero-shot, transferred and oracle (the target's own descriptor) accuracy on held-out draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .bank import Operator
from .descriptor import Descriptor, ProbeGrid, Provenance
from .edit import LinearSite, fold, unfold


def _unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=1)


@dataclass
class ToyModel:
    """A tiny dual encoder: `tower` maps latent samples (n, k) to embeddings (n, d); `text` (C, d)."""

    name: str
    tower: nn.Sequential
    text: torch.Tensor

    def embed(self, x: torch.Tensor, edit: torch.Tensor | None = None) -> torch.Tensor:
        with torch.no_grad():
            return _unit(self.tower(x if edit is None else x @ edit.T))

    def accuracy(self, x: torch.Tensor, labels: torch.Tensor, edit: torch.Tensor | None = None) -> float:
        logits = self.embed(x, edit) @ _unit(self.text).T
        return float((logits.argmax(dim=1) == labels).double().mean())


@dataclass
class ToyWorld:
    centroids: torch.Tensor  # (C, k)
    noise: float
    models: list[ToyModel]
    edit: torch.Tensor  # (k, k) the shared "fine-tune" I + beta P_C
    seed: int

    def sample(self, per_class: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        labels = torch.arange(len(self.centroids)).repeat_interleave(per_class)
        x = self.centroids[labels] + self.noise * torch.randn(len(labels), self.centroids.shape[1], generator=g)
        return x, labels


def make_world(seed: int = 0, k: int = 32, classes: int = 10, widths=((64, 48), (96, 80)),
               noise: float = 2.0, beta: float = 1.5) -> ToyWorld:
    """Build the world: `widths` gives (hidden width, embedding width d) per model."""
    g = torch.Generator().manual_seed(seed)
    centroids = torch.randn(classes, k, generator=g)
    basis, _ = torch.linalg.qr(centroids.T)  # (k, C) orthonormal basis of the centroids' span
    edit = torch.eye(k) + beta * basis @ basis.T
    pretrain_x = torch.randn(4096, k, generator=g) * 1.5
    models = []
    for i, (w, d) in enumerate(widths):
        Q = torch.randn(d, k, generator=g) / k**0.5
        tower = nn.Sequential(nn.Linear(k, w), nn.Tanh(), nn.Linear(w, d))
        with torch.no_grad():
            tower[0].weight.copy_(torch.randn(w, k, generator=g) / k**0.5)
            tower[0].bias.zero_()
            h = tower[1](tower[0](pretrain_x))
            h1 = torch.cat([h, torch.ones(len(h), 1)], dim=1)
            fit = torch.linalg.lstsq(h1, pretrain_x @ Q.T).solution  # (w + 1, d)
            tower[2].weight.copy_(fit[:-1].T)
            tower[2].bias.copy_(fit[-1])
        models.append(ToyModel(name=f"toy-{i}-d{d}", tower=tower, text=centroids @ Q.T))
    return ToyWorld(centroids=centroids, noise=noise, models=models, edit=edit, seed=seed)


def measure(model: ToyModel, world: ToyWorld, grid: ProbeGrid, probes: torch.Tensor) -> Descriptor:
    """The descriptor of the world's fine-tune as seen by `model`, on `grid`."""
    return Descriptor.from_embeddings(
        model.embed(probes), model.embed(probes, world.edit), model.text, grid,
        Provenance(source=model.name, finetune="synthetic latent edit (I + beta P_C)"),
    )


def run_demo(seed: int = 0, alpha: float = 1.0) -> dict:
    """Transfer the fine-tune from model 0 to model 1 and back; return accuracies and residuals."""
    world = make_world(seed)
    probes, _ = world.sample(per_class=30, seed=42)  # unlabeled probes, 30 per class as in the paper
    test_x, test_y = world.sample(per_class=200, seed=7)
    grid = ProbeGrid.from_probes("synthetic", [f"class {c}" for c in range(len(world.centroids))], probes)
    rows = []
    for src, tgt in ((world.models[0], world.models[1]), (world.models[1], world.models[0])):
        source_desc, own_desc = measure(src, world, grid, probes), measure(tgt, world, grid, probes)
        F, G = tgt.embed(probes), _unit(tgt.text)
        site = LinearSite(tgt.tower[2])
        row = {"source": src.name, "target": tgt.name, "UTD cosine": source_desc.cosine(own_desc),
               "zero-shot": tgt.accuracy(test_x, test_y), "own fine-tune": tgt.accuracy(test_x, test_y, world.edit)}
        for label, desc in (("transferred", source_desc), ("oracle", own_desc)):
            op = Operator.solve(F, G, desc, target=tgt.name)
            record = fold(site, op, alpha)
            row[label] = tgt.accuracy(test_x, test_y)
            row[f"{label} residual"] = op.residual
            unfold(record)
        rows.append(row)
    return {"seed": seed, "alpha": alpha, "rows": rows}
