"""Top-1 accuracy of a dual encoder's zero-shot classifier: the one reducer every caller uses."""

from __future__ import annotations

import torch

from .errors import InvalidInputError


def top1(z: torch.Tensor, prompts: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of rows whose nearest prompt is their label.

    z (n, d) image (or audio) embeddings, prompts (M, d) class-prompt embeddings, labels (n,) in [0, M).
    prediction_i = argmax_j <normalise(z_i), normalise(prompts_j)>; computed in z's dtype.
    """
    if z.shape[0] != labels.shape[0]:
        raise InvalidInputError(f"top1: {z.shape[0]} embeddings for {labels.shape[0]} labels")
    g = torch.nn.functional.normalize(prompts.to(z.dtype), dim=1)
    pred = (torch.nn.functional.normalize(z, dim=1) @ g.T).argmax(dim=1)
    return float((pred.cpu() == labels.cpu()).double().mean())
