"""First-order check: a known small linear edit of the target is recovered by solve + fold."""

import torch
from torch import nn

from platonic import Descriptor, LinearSite, Operator, ProbeGrid, fold


def unit(x):
    return torch.nn.functional.normalize(x, dim=1)


def test_known_linear_edit_is_reproduced_by_solve_and_fold():
    """EuroSAT-sized grid (N = 300 probes, M = 10 prompts) on a d = 64 tower.

    What is left over is not solver error: normalisation turns the edit into T f - (f^T T f) f, whose
    radial part is no linear map of f (its share shrinks as d grows),
    plus the ridge shrinkage of F's weakest directions.
    """
    g = torch.Generator().manual_seed(0)
    n, m, w, d = 300, 10, 96, 64
    tower = nn.Sequential(nn.Linear(10, w), nn.Tanh(), nn.Linear(w, d))
    probes = torch.randn(n, 10, generator=g)
    G = unit(torch.randn(m, d, generator=g))
    T = 0.1 / d**0.5 * torch.randn(d, d, generator=g)  # the known edit z -> (I + T) z, moving z by ~10%

    with torch.no_grad():
        z = tower(probes)
        F0 = unit(z)
        F_edit = unit(z @ (torch.eye(d) + T).T)
        grid = ProbeGrid.from_probes("synthetic", [f"class {j}" for j in range(m)], probes)
        U = Descriptor(F_edit @ G.T - F0 @ G.T, grid)

        op = Operator.solve(F0, G, U, target="tower")
        fold(LinearSite(tower[2]), op, alpha=1.0)
        U_hat = unit(tower(probes)) @ G.T - F0 @ G.T

    residual = float((U_hat - U.matrix).norm() / U.matrix.norm())
    print(f"first-order relative residual: {residual:.4f} (solve residual {op.residual:.4f})")
    assert residual < 0.15
    assert op.residual < 0.15
