"""The closed-form transfer: a two-sided (dual-factor) kernel ridge solve.

Pure tensor functions (method.md §1.2). Given the target's normalised probe embeddings
F (N, k), its normalised prompt embeddings G (M, d) and a descriptor U (N, M), solve

    X* = argmin_X ||F X G^T - U||_F^2 + mu_b ||F X||_F^2 + mu_a ||X G^T||_F^2 + mu_a mu_b ||X||_F^2

whose normal equations are (F^T F + mu_a I) X (G^T G + mu_b I) = F^T U G, so that, with thin SVDs
F = L_a S_a R_a^T and G^T = L_b S_b R_b^T,

    X* = R_a S_a+ (L_a^T U R_b) S_b+ L_b^T,   S+ = diag(s / (s^2 + mu)).

`mu_a` and `mu_b` are *relative*: the absolute weights are mu_a * mean(s_a^2) and
mu_b * mean(s_b^2), the means over the min(N, k) and min(M, d) singular values.

For the projection forms F is the (N, d) matrix of embeddings and the operator is A = X^T (d, d):
f_new = (I + alpha A) f. The same function solves the general design-matrix form of method.md §1.6:
pass H (N, p + 1) with rows [u(x); 1] / ||z(x)|| (see `head_design_matrix`) in place of F and
X (p + 1, d) is the head update B = [dW^T; db^T]. The map U -> X is exactly linear.

How it is computed (same result as the two SVDs, measured in benchmarks/bench_solve.py):
the left factor R_a S_a+ L_a^T equals (F^T F + mu_a I)^{-1} F^T, applied through a Cholesky
factor of the smaller Gram matrix (well conditioned: mu_a is 1% of the mean eigenvalue); the right
factor R_b S_b+ L_b^T uses a thin SVD of G, which is small (M, d) and keeps full accuracy at the
tiny mu_b. A rank cap keeps only the top r singular directions of each factor.
"""

from __future__ import annotations

import torch

from ._checks import as_finite_scalar, as_matrix
from .errors import InvalidInputError

DEFAULT_MU_A = 1e-2
DEFAULT_MU_B = 1e-6


def _check_mu(name: str, mu: float) -> float:
    mu = as_finite_scalar(name, mu)
    if mu <= 0:
        raise InvalidInputError(f"{name} must be > 0 (it is relative to the mean squared singular value); got {mu}")
    return mu


def _check_rank(rank: int | None) -> int | None:
    if rank is None:
        return None
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise InvalidInputError(f"rank must be a positive integer or None; got {rank!r}")
    return rank


class RidgeSolver:
    """Factor one target grid (F, G) once, then solve many descriptors on it.

    Args:
        F: (N, k) target probe design matrix (normalised embeddings, k = d; or H for a head edit).
        G: (M, d) target prompt embeddings, normalised.
        mu_a: relative ridge weight on F's side (default 1e-2).
        mu_b: relative ridge weight on G's side (default 1e-6).
        rank: keep only the top `rank` singular directions of F and of G (None: all).

    `solve(U)` returns X (k, d) in the dtype of F; `solve_many(Us)` stacks several.

    Example:
        >>> F = torch.nn.functional.normalize(torch.randn(40, 8), dim=1)
        >>> G = torch.nn.functional.normalize(torch.randn(5, 8), dim=1)
        >>> U = 0.01 * torch.randn(40, 5)
        >>> X = RidgeSolver(F, G).solve(U)
        >>> X.shape
        torch.Size([8, 8])
    """

    def __init__(self, F, G, mu_a: float = DEFAULT_MU_A, mu_b: float = DEFAULT_MU_B, rank: int | None = None):
        F = as_matrix("F (target probe embeddings, N x d)", F)
        G = as_matrix("G (target prompt embeddings, M x d)", G)
        self.mu_a = _check_mu("mu_a", mu_a)
        self.mu_b = _check_mu("mu_b", mu_b)
        self.rank = _check_rank(rank)
        self.dtype = F.dtype
        self.n_probes, self.k = F.shape
        self.n_prompts, self.d = G.shape
        F64 = F.detach().to(torch.float64)
        G64 = G.detach().to(torch.float64)
        self._F, self._G = F64, G64
        self._left = _LeftFactor(F64, self.mu_a, self.rank)
        self._right_t = _right_factor_t(G64, self.mu_b, self.rank)  # (M, d) = (R_b S_b+ L_b^T)

    @property
    def mu_a_absolute(self) -> float:
        """mu_a times the mean squared singular value of F."""
        return self._left.mu

    def solve(self, U) -> torch.Tensor:
        """X (k, d) for one descriptor U (N, M); float64 inside, F's dtype out."""
        U = as_matrix("U (descriptor, N x M)", U, rows=self.n_probes, cols=self.n_prompts)
        X = self._left.apply(U.detach().to(torch.float64, copy=False)) @ self._right_t
        return X.to(self.dtype)

    def relative_residual(self, X, U) -> float:
        """||F X G^T - U||_F / ||U||_F on this solver's grid."""
        return relative_residual(self._F, self._G, X, U)

    def solve_many(self, Us) -> torch.Tensor:
        """X (B, k, d) for B descriptors on this grid, sharing one pass over F."""
        Us = [as_matrix(f"U[{i}] (descriptor, N x M)", U, rows=self.n_probes, cols=self.n_prompts) for i, U in enumerate(Us)]
        if not Us:
            raise InvalidInputError("solve_many needs at least one descriptor")
        wide = torch.cat([U.detach().to(torch.float64) for U in Us], dim=1)  # (N, B*M)
        left = self._left.apply(wide)  # (k, B*M)
        blocks = left.split(self.n_prompts, dim=1)
        return torch.stack([b @ self._right_t for b in blocks]).to(self.dtype)


class _LeftFactor:
    """Applies P_a = R_a S_a+ L_a^T = (F^T F + mu I)^{-1} F^T (k, N) to a matrix with N rows."""

    def __init__(self, F: torch.Tensor, mu_rel: float, rank: int | None):
        n, k = F.shape
        self.F = F
        self.wide = n < k  # work with the (N, N) Gram instead of (k, k)
        gram = F @ F.T if self.wide else F.T @ F
        self.mu = mu_rel * float(torch.diagonal(gram).sum()) / min(n, k)
        if self.mu <= 0:
            raise InvalidInputError("F is all zeros; the target's probe embeddings carry no signal")
        eye = torch.eye(gram.shape[0], dtype=gram.dtype)
        if rank is None or rank >= min(n, k):
            self.chol = torch.linalg.cholesky(gram + self.mu * eye)
            self.eig = None
        else:
            evals, vecs = torch.linalg.eigh(gram)  # ascending
            evals, vecs = evals[-rank:].clamp_min(0), vecs[:, -rank:]
            self.chol = None
            self.eig = (vecs, 1.0 / (evals + self.mu))

    def _inverse(self, B: torch.Tensor) -> torch.Tensor:
        """(Gram + mu I)^{-1} B, restricted to the top-rank eigenspace when capped."""
        if self.chol is not None:
            return torch.cholesky_solve(B, self.chol)
        vecs, w = self.eig
        return vecs @ (w[:, None] * (vecs.T @ B))

    def apply(self, U: torch.Tensor) -> torch.Tensor:
        if self.wide:  # F^T (F F^T + mu I)^{-1} U
            return self.F.T @ self._inverse(U)
        return self._inverse(self.F.T @ U)  # (F^T F + mu I)^{-1} F^T U


def _right_factor_t(G: torch.Tensor, mu_rel: float, rank: int | None) -> torch.Tensor:
    """Q = R_b S_b+ L_b^T (M, d) for G^T = L_b S_b R_b^T, i.e. G = R_b S_b L_b^T."""
    Rb, s, LbT = torch.linalg.svd(G, full_matrices=False)  # Rb (M, r), s (r,), LbT (r, d)
    mu = mu_rel * float((s**2).mean())
    if mu <= 0:
        raise InvalidInputError("G is all zeros; the target's prompt embeddings carry no signal")
    if rank is not None:
        Rb, s, LbT = Rb[:, :rank], s[:rank], LbT[:rank]
    return (Rb * (s / (s**2 + mu))) @ LbT


def solve(F, G, U, mu_a: float = DEFAULT_MU_A, mu_b: float = DEFAULT_MU_B, rank: int | None = None) -> torch.Tensor:
    """Closed-form transfer X* (k, d) of descriptor U (N, M) onto the target grid (F (N, k), G (M, d)).

    For the projection forms k = d and the operator is A = X^T: f_new = (I + alpha A) f.
    See the module docstring for the objective and formula; `RidgeSolver` reuses the factorisation.
    """
    return RidgeSolver(F, G, mu_a=mu_a, mu_b=mu_b, rank=rank).solve(U)


def solve_reference(F, G, U, mu_a: float = DEFAULT_MU_A, mu_b: float = DEFAULT_MU_B, rank: int | None = None) -> torch.Tensor:
    """The straightforward evaluation of the formula through two thin SVDs (float64).

    X = R_a S_a+ (L_a^T U R_b) S_b+ L_b^T. Kept as the reference the fast path is checked and timed against.
    """
    F = as_matrix("F", F).to(torch.float64)
    G = as_matrix("G", G).to(torch.float64)
    U = as_matrix("U", U, rows=F.shape[0], cols=G.shape[0]).to(torch.float64)
    La, sa, RaT = torch.linalg.svd(F, full_matrices=False)
    Lb, sb, RbT = torch.linalg.svd(G.T, full_matrices=False)
    mua = _check_mu("mu_a", mu_a) * float((sa**2).mean())
    mub = _check_mu("mu_b", mu_b) * float((sb**2).mean())
    if rank is not None:
        La, sa, RaT = La[:, :rank], sa[:rank], RaT[:rank]
        Lb, sb, RbT = Lb[:, :rank], sb[:rank], RbT[:rank]
    core = (La.T @ U @ RbT.T) * (sa / (sa**2 + mua))[:, None] * (sb / (sb**2 + mub))[None, :]
    return RaT.T @ core @ Lb.T


def relative_residual(F, G, X, U) -> float:
    """||F X G^T - U||_F / ||U||_F: how much of the descriptor the first-order model reproduces."""
    F = as_matrix("F", F).to(torch.float64)
    G = as_matrix("G", G).to(torch.float64)
    X = as_matrix("X", X, rows=F.shape[1], cols=G.shape[1]).to(torch.float64)
    U = as_matrix("U", U, rows=F.shape[0], cols=G.shape[0]).to(torch.float64)
    norm = float(torch.linalg.matrix_norm(U))
    if norm == 0:
        raise InvalidInputError("U is all zeros; the relative residual is undefined (nothing to transfer)")
    return float(torch.linalg.matrix_norm(F @ X @ G.T - U)) / norm


def head_design_matrix(u, z) -> torch.Tensor:
    """H (N, p + 1) with rows [u(x); 1] / ||z(x)|| for an edit of a residual head's last affine.

    u: (N, p) inputs of the head's last affine (e.g. SigLIP's fc2); z: (N, d) the unnormalised
    embeddings the affine adds into. Solving with H in place of F gives B = [dW^T; db^T] (p + 1, d).
    """
    u = as_matrix("u (inputs of the last affine, N x p)", u)
    z = as_matrix("z (unnormalised embeddings, N x d)", z, rows=u.shape[0])
    norms = torch.linalg.vector_norm(z, dim=1, keepdim=True)
    if (norms == 0).any():
        raise InvalidInputError("some embeddings z have zero norm; they cannot be normalised")
    ones = torch.ones(u.shape[0], 1, dtype=u.dtype, device=u.device)
    return torch.cat([u, ones], dim=1) / norms
