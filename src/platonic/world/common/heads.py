"""The heads every world model shares: the trainable text head over the frozen sentence embedding, and the
logit head (learned temperature; a bias for the sigmoid loss)."""

from __future__ import annotations

import torch
from torch import nn

from ...errors import InvalidInputError


class TextHead(nn.Module):
    """Trainable head over the frozen 384-d sentence embedding: 'linear' or 'mlp' design."""

    def __init__(self, design: str, in_dim: int, embed_dim: int):
        super().__init__()
        self.design = design
        if design == "linear":
            self.net = nn.Linear(in_dim, embed_dim)
        elif design == "mlp":
            self.net = nn.Sequential(nn.Linear(in_dim, 512), nn.GELU(), nn.Linear(512, embed_dim))
        else:
            raise InvalidInputError(f"unknown text head design {design!r}; use 'linear' or 'mlp'")

    def forward(self, s):
        return self.net(s)


class LogitHead(nn.Module):
    """Learned temperature (log scale) and, for the sigmoid loss, a bias."""

    def __init__(self, loss: str):
        super().__init__()
        if loss == "clip":
            self.log_scale = nn.Parameter(torch.tensor(float(torch.log(torch.tensor(1 / 0.07)))))
            self.bias = nn.Parameter(torch.zeros(()), requires_grad=False)
        else:
            self.log_scale = nn.Parameter(torch.tensor(float(torch.log(torch.tensor(10.0)))))
            self.bias = nn.Parameter(torch.tensor(-2.0))

    @property
    def scale(self) -> torch.Tensor:
        return self.log_scale.clamp(max=4.6052).exp()
