"""Numerical checks that an edit site is exact on a real model (used by tests and the sweep script)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .bank import Operator, Term
from .edit import EditSite, ProbeEmbeddings, fold, unfold


@dataclass(frozen=True)
class FoldCheck:
    """Result of `check_fold`: errors relative to the predicted embeddings and to the edit's size."""

    rel_error: float  # ||z_folded - z_pred|| / ||z_pred||
    rel_error_of_change: float  # ||z_folded - z_pred|| / ||z_pred - z_0||
    restored_exactly: bool  # unfold gave back bit-identical embeddings

    def ok(self, tol: float = 1e-4) -> bool:
        return self.rel_error < tol and self.rel_error_of_change < 1e-2 and self.restored_exactly


def random_operator(model, seed: int = 0, scale: float = 0.05) -> Operator:
    """A random operator of the model's edit-site form (A (d, d) or B (p + 1, d))."""
    site = model.edit_site
    g = torch.Generator().manual_seed(seed)
    shape = site.expected_delta_shape()
    delta = scale * torch.randn(shape, generator=g)
    return Operator(delta=delta, form=site.form, target=model.fingerprint, terms=(Term(1.0, "random", "check"),))


def predicted_embeddings(site: EditSite, z0: torch.Tensor, u: torch.Tensor | None, operator: Operator,
                         alpha: float) -> torch.Tensor:
    """z -> (I + alpha A) z for linear operators; z -> z + alpha [u; 1] B for head updates (the site's
    `embedding_change`). z0 (N, d), u (N, p) or None; returns (N, d) float64."""
    z0 = z0.double()
    return z0 + alpha * site.embedding_change(ProbeEmbeddings(z0, None if u is None else u.double()), operator.delta)


def check_fold(model, probes: torch.Tensor, alpha: float = 0.5, seed: int = 0) -> FoldCheck:
    """Fold a random operator into `model`'s edit site and compare embeddings with the prediction."""
    before = model.encode_probes(probes)
    op = random_operator(model, seed)
    pred = predicted_embeddings(model.edit_site, before.z, before.u, op, alpha)
    record = fold(model.edit_site, op, alpha)
    try:
        after = model.encode_probes(probes).z.double()
    finally:
        unfold(record)
    restored = model.encode_probes(probes).z
    err = float((after - pred).norm())
    return FoldCheck(
        rel_error=err / float(pred.norm()),
        rel_error_of_change=err / float((pred - before.z.double()).norm()),
        restored_exactly=torch.equal(restored, before.z),
    )
