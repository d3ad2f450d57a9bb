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

Why the objective is a weighted distance to X*. With A = F^T F + mu_a I (k, k) and
B = G^T G + mu_b I (d, d) the objective is J(X) = tr(X^T A X B) - 2 <X, F^T U G> + ||U||^2, so

    J(X) = ||A^{1/2} (X - X*) B^{1/2}||_F^2 + J(X*).                                  (*)

Anchored solve (beyond the paper; `anchor=F_pool`). F_pool (P, k) holds the target's design rows of
a fixed pool of unlabeled inputs (normalised embeddings; for a head edit the same map
`head_design_matrix` applied to the pool). The solve then also asks the edit to leave the pool's
affinities unchanged:

    J_anc(X) = J(X) + lambda ||F_pool X G^T||_F^2 + lambda mu_b ||F_pool X||_F^2
             = ||[F; sqrt(lambda) F_pool] X G^T - [U; 0]||^2 + mu_b ||[F; sqrt(lambda) F_pool] X||^2
               + mu_a ||X G^T||^2 + mu_a mu_b ||X||^2,

i.e. the paper's objective with the pool appended as probes whose descriptor rows are zero (mu_a
stays the one computed from F alone). Its quadratic form still factorises, as
(G^T G + mu_b I) (x) (F^T F + mu_a I + lambda F_pool^T F_pool), so

    X_anc = (F^T F + mu_a I + lambda F_pool^T F_pool)^{-1} F^T U G (G^T G + mu_b I)^{-1},

exactly linear in U, and (*) holds with A = F^T F + mu_a I + lambda F_pool^T F_pool. `anchor_weight`
is relative: lambda = anchor_weight * ||F||_F^2 / ||F_pool||_F^2, so anchor_weight = 1 gives the
pool, in total, the weight of the probes (for unit rows: lambda = anchor_weight * N / P).

Rank caps (`rank=r`; not linear in U). Two truncations, both of rank <= r:

- "paper" (default; the reference code's `rank_capped_solve`): Eckart-Young on the projected
  descriptor W = L_a^T U R_b, then the ridge filters:  X_r = R_a S_a+ [W]_r S_b+ L_b^T. Exactly,
  X_r = X*(U_r): the full-rank solve of U_r = L_a [W]_r R_b^T, the best rank-r approximation of
  the descriptor projected onto the target's spans. It minimises the fit term ||F X G^T - U||^2
  over rank-r X when mu_a, mu_b -> 0; with the ridge it is close to, not exactly, the optimum of J.
- "optimal": the exact minimiser of J (or J_anc) over rank(X) <= r. By (*) and Eckart-Young in the
  whitened metric, X_r = A^{-1/2} [A^{1/2} X* B^{1/2}]_r B^{-1/2}
  (= A^{-1/2} [A^{-1/2} F^T U G B^{-1/2}]_r B^{-1/2}).

[M]_r is M's best rank-r approximation (top r singular triplets). Since neither is linear in U,
`solve_many` and banks apply a cap per operator: a sum of capped operators is the sum of the
capped solves (rank up to the sum of the caps), not the capped solve of the summed descriptor.
The anchored solve supports only the "optimal" truncation.

How the uncapped solve is computed (same result as the two SVDs, measured in
benchmarks/bench_solve.py): the left factor R_a S_a+ L_a^T equals (F^T F + mu_a I)^{-1} F^T, applied
through a Cholesky factor of the smaller Gram matrix (well conditioned: mu_a is 1% of the mean
eigenvalue); the right factor R_b S_b+ L_b^T uses a thin SVD of G, which is small (M, d) and keeps
full accuracy at the tiny mu_b.
"""

from __future__ import annotations

import torch

from ._checks import as_finite_scalar, as_matrix
from .errors import InvalidInputError
from .solve_config import DEFAULT_ANCHOR_WEIGHT, DEFAULT_MU_A, DEFAULT_MU_B

TRUNCATIONS = ("paper", "optimal")


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


def _check_truncation(truncation: str, rank: int | None, anchored: bool) -> str:
    if truncation not in TRUNCATIONS:
        raise InvalidInputError(f"truncation must be one of {TRUNCATIONS}; got {truncation!r}")
    if rank is not None and anchored and truncation != "optimal":
        raise InvalidInputError("a rank-capped anchored solve has no paper truncation; pass truncation='optimal'")
    return truncation


def _top_singular(M: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The top `rank` singular triplets (u (m, r), s (r,), vh (r, n)) of M: [M]_r = (u * s) @ vh (Eckart-Young)."""
    u, s, vh = torch.linalg.svd(M, full_matrices=False)
    return u[:, :rank], s[:rank], vh[:rank]


def _inverse_sqrt(S: torch.Tensor) -> torch.Tensor:
    """S^{-1/2} of a symmetric positive definite matrix, through its eigendecomposition."""
    evals, vecs = torch.linalg.eigh(S)
    if float(evals[0]) <= 0:
        raise InvalidInputError("the ridge's quadratic form is not positive definite; raise mu_a or mu_b")
    return (vecs * evals.rsqrt()) @ vecs.T


class RidgeSolver:
    """Factor one target grid (F, G) once, then solve many descriptors on it.

    Args:
        F: (N, k) target probe design matrix (normalised embeddings, k = d; or H for a head edit).
        G: (M, d) target prompt embeddings, normalised.
        mu_a: relative ridge weight on F's side (default 1e-2).
        mu_b: relative ridge weight on G's side (default 1e-6).
        rank: cap rank(X) at `rank` (None: no cap); not linear in U, see the module docstring.
        truncation: how a rank cap is applied: "paper" (default) or "optimal" (the exact minimiser).
        anchor: (P, k) F_pool, the target's design rows of a fixed pool of unlabeled inputs (None:
            the paper's solve). Adds lambda F_pool^T F_pool to F's side of the ridge.
        anchor_weight: relative pool weight; lambda = anchor_weight * ||F||_F^2 / ||F_pool||_F^2.

    `solve(U)` returns X (k, d) in the dtype of F; `solve_many(Us)` stacks several.

    Example:
        >>> F = torch.nn.functional.normalize(torch.randn(40, 8), dim=1)
        >>> G = torch.nn.functional.normalize(torch.randn(5, 8), dim=1)
        >>> U = 0.01 * torch.randn(40, 5)
        >>> X = RidgeSolver(F, G).solve(U)
        >>> X.shape
        torch.Size([8, 8])
    """

    def __init__(self, F, G, mu_a: float = DEFAULT_MU_A, mu_b: float = DEFAULT_MU_B, rank: int | None = None,
                 truncation: str = "paper", anchor=None, anchor_weight: float = DEFAULT_ANCHOR_WEIGHT):
        F = as_matrix("F (target probe embeddings, N x d)", F)
        G = as_matrix("G (target prompt embeddings, M x d)", G)
        self.mu_a = _check_mu("mu_a", mu_a)
        self.mu_b = _check_mu("mu_b", mu_b)
        self.rank = _check_rank(rank)
        self.truncation = _check_truncation(truncation, self.rank, anchor is not None)
        self.dtype = F.dtype
        self.n_probes, self.k = F.shape
        self.n_prompts, self.d = G.shape
        F64 = F.detach().to(torch.float64)
        G64 = G.detach().to(torch.float64)
        self._F, self._G = F64, G64
        pool = None
        self.anchor_weight = None
        if anchor is not None:
            pool = as_matrix(f"anchor (pool design rows, P x {self.k})", anchor, cols=self.k).detach().to(torch.float64)
            self.anchor_weight = _check_mu("anchor_weight", anchor_weight)
        self.n_anchor = 0 if pool is None else pool.shape[0]
        self._left = _LeftFactor(F64, self.mu_a, pool, self.anchor_weight)
        self._right_t = _right_factor_t(G64, self.mu_b)  # (M, d) = (R_b S_b+ L_b^T)
        self._cap = None
        if self.rank is not None:
            self._cap = (_RankCap.optimal(self._left, G64, self.mu_b * _mean_sq_singular(G64), self.rank)
                         if self.truncation == "optimal" else _RankCap.paper(F64, G64, self.mu_a, self.mu_b, self.rank))

    @property
    def kind(self) -> str:
        """"paper" (the solve of method.md §1.2) or "anchored" (with the pool term)."""
        return "paper" if self.n_anchor == 0 else "anchored"

    @property
    def mu_a_absolute(self) -> float:
        """mu_a times the mean squared singular value of F."""
        return self._left.mu

    @property
    def anchor_weight_absolute(self) -> float | None:
        """lambda = anchor_weight * ||F||_F^2 / ||F_pool||_F^2 (None without an anchor)."""
        return self._left.lam

    def describe(self) -> dict:
        """The solve's settings as JSON-able values (for an operator's record)."""
        return {"kind": self.kind, "mu_a": self.mu_a, "mu_b": self.mu_b, "rank": self.rank,
                "truncation": self.truncation if self.rank is not None else None,
                "anchor_weight": self.anchor_weight, "n_anchor": self.n_anchor}

    def _solve64(self, U: torch.Tensor) -> torch.Tensor:
        if self._cap is not None:
            return self._cap.apply(U)
        return self._left.apply(U) @ self._right_t

    def solve(self, U) -> torch.Tensor:
        """X (k, d) for one descriptor U (N, M); float64 inside, F's dtype out."""
        U = as_matrix("U (descriptor, N x M)", U, rows=self.n_probes, cols=self.n_prompts)
        return self._solve64(U.detach().to(torch.float64, copy=False)).to(self.dtype)

    def relative_residual(self, X, U) -> float:
        """||F X G^T - U||_F / ||U||_F on this solver's grid."""
        return relative_residual(self._F, self._G, X, U)

    def solve_many(self, Us) -> torch.Tensor:
        """X (B, k, d) for B descriptors on this grid, sharing one pass over F (a rank cap applies to each)."""
        Us = [as_matrix(f"U[{i}] (descriptor, N x M)", U, rows=self.n_probes, cols=self.n_prompts) for i, U in enumerate(Us)]
        if not Us:
            raise InvalidInputError("solve_many needs at least one descriptor")
        if self._cap is not None:
            return torch.stack([self._cap.apply(U.detach().to(torch.float64)) for U in Us]).to(self.dtype)
        wide = torch.cat([U.detach().to(torch.float64) for U in Us], dim=1)  # (N, B*M)
        left = self._left.apply(wide)  # (k, B*M)
        blocks = left.split(self.n_prompts, dim=1)
        return torch.stack([b @ self._right_t for b in blocks]).to(self.dtype)


class _LeftFactor:
    """Applies (F^T F + mu I + lam F_pool^T F_pool)^{-1} F^T (k, N) to a matrix with N rows.

    Without a pool this is P_a = R_a S_a+ L_a^T, through the Cholesky factor of the smaller Gram
    matrix ((N, N) when N < k); with a pool, through the (k, k) one.
    """

    def __init__(self, F: torch.Tensor, mu_rel: float, pool: torch.Tensor | None, weight_rel: float | None):
        n, k = F.shape
        self.F = F
        self.lam = None
        self.wide = n < k and pool is None  # work with the (N, N) Gram instead of (k, k)
        gram = F @ F.T if self.wide else F.T @ F
        energy = float(torch.diagonal(gram).sum())  # ||F||_F^2 = sum of s_a^2
        self.mu = mu_rel * energy / min(n, k)
        if self.mu <= 0:
            raise InvalidInputError("F is all zeros; the target's probe embeddings carry no signal")
        if pool is not None:
            pool_energy = float(pool.square().sum())
            if pool_energy <= 0:
                raise InvalidInputError("the anchor pool's design rows are all zeros; embed a pool of real inputs")
            self.lam = weight_rel * energy / pool_energy
            gram = gram + self.lam * (pool.T @ pool)
        self.system = gram + self.mu * torch.eye(gram.shape[0], dtype=gram.dtype)  # F's side of the quadratic form (k, k) unless wide
        self.chol = torch.linalg.cholesky(self.system)

    def apply(self, U: torch.Tensor) -> torch.Tensor:
        if self.wide:  # F^T (F F^T + mu I)^{-1} U
            return self.F.T @ torch.cholesky_solve(U, self.chol)
        return torch.cholesky_solve(self.F.T @ U, self.chol)

    def quadratic_form(self) -> torch.Tensor:
        """A = F^T F + mu I (+ lam F_pool^T F_pool), (k, k)."""
        if self.wide:
            return self.F.T @ self.F + self.mu * torch.eye(self.F.shape[1], dtype=self.F.dtype)
        return self.system


def _mean_sq_singular(G: torch.Tensor) -> float:
    """mean(s^2) over the min(M, d) singular values of G, i.e. ||G||_F^2 / min(M, d)."""
    return float(G.square().sum()) / min(G.shape)


def _right_factor_t(G: torch.Tensor, mu_rel: float) -> torch.Tensor:
    """Q = R_b S_b+ L_b^T (M, d) for G^T = L_b S_b R_b^T, i.e. G = R_b S_b L_b^T."""
    Rb, s, LbT = torch.linalg.svd(G, full_matrices=False)  # Rb (M, r), s (r,), LbT (r, d)
    mu = mu_rel * float((s**2).mean())
    if mu <= 0:
        raise InvalidInputError("G is all zeros; the target's prompt embeddings carry no signal")
    return (Rb * (s / (s**2 + mu))) @ LbT


class _RankCap:
    """X_r = left @ [pre_left @ U @ pre_right]_r @ right: a rank-capped solve (module docstring)."""

    def __init__(self, pre_left, pre_right, left, right, rank: int):
        self.pre_left, self.pre_right, self.left, self.right, self.rank = pre_left, pre_right, left, right, rank

    @classmethod
    def paper(cls, F, G, mu_a_rel: float, mu_b_rel: float, rank: int) -> "_RankCap":
        """W = L_a^T U R_b (r_a, r_b) truncated, then X_r = (R_a S_a+) [W]_r (S_b+ L_b^T)."""
        La, sa, RaT = torch.linalg.svd(F, full_matrices=False)
        Rb, sb, LbT = torch.linalg.svd(G, full_matrices=False)  # G = R_b S_b L_b^T
        fa = sa / (sa**2 + mu_a_rel * float((sa**2).mean()))
        fb = sb / (sb**2 + mu_b_rel * float((sb**2).mean()))
        return cls(La.T, Rb, RaT.T * fa, fb[:, None] * LbT, rank)

    @classmethod
    def optimal(cls, left: _LeftFactor, G, mu_b: float, rank: int) -> "_RankCap":
        """Y* = A^{-1/2} F^T U G B^{-1/2} truncated, then X_r = A^{-1/2} [Y*]_r B^{-1/2}."""
        a_isqrt = _inverse_sqrt(left.quadratic_form())  # (k, k)
        b_isqrt = _inverse_sqrt(G.T @ G + mu_b * torch.eye(G.shape[1], dtype=G.dtype))  # (d, d)
        return cls(a_isqrt @ left.F.T, G @ b_isqrt, a_isqrt, b_isqrt, rank)

    def apply(self, U: torch.Tensor) -> torch.Tensor:
        u, s, vh = _top_singular(self.pre_left @ U @ self.pre_right, self.rank)
        return (self.left @ (u * s)) @ (vh @ self.right)  # an outer product of rank-r factors: rank <= r exactly


def solve(F, G, U, mu_a: float = DEFAULT_MU_A, mu_b: float = DEFAULT_MU_B, rank: int | None = None,
          truncation: str = "paper", anchor=None, anchor_weight: float = DEFAULT_ANCHOR_WEIGHT) -> torch.Tensor:
    """Closed-form transfer X* (k, d) of descriptor U (N, M) onto the target grid (F (N, k), G (M, d)).

    For the projection forms k = d and the operator is A = X^T: f_new = (I + alpha A) f.
    `anchor` (P, k) = F_pool selects the anchored solve; `rank` caps rank(X) (see `RidgeSolver` and
    the module docstring for the objectives and formulas); `RidgeSolver` reuses the factorisation.
    """
    return RidgeSolver(F, G, mu_a=mu_a, mu_b=mu_b, rank=rank, truncation=truncation, anchor=anchor,
                       anchor_weight=anchor_weight).solve(U)


def solve_reference(F, G, U, mu_a: float = DEFAULT_MU_A, mu_b: float = DEFAULT_MU_B, rank: int | None = None) -> torch.Tensor:
    """The straightforward evaluation of the formula through two thin SVDs (float64).

    X = R_a S_a+ (L_a^T U R_b) S_b+ L_b^T; with `rank`, the paper's truncation
    X_r = R_a S_a+ [L_a^T U R_b]_r S_b+ L_b^T. Kept as the reference the fast path is checked and timed against.
    """
    F = as_matrix("F", F).to(torch.float64)
    G = as_matrix("G", G).to(torch.float64)
    U = as_matrix("U", U, rows=F.shape[0], cols=G.shape[0]).to(torch.float64)
    La, sa, RaT = torch.linalg.svd(F, full_matrices=False)
    Lb, sb, RbT = torch.linalg.svd(G.T, full_matrices=False)
    mua = _check_mu("mu_a", mu_a) * float((sa**2).mean())
    mub = _check_mu("mu_b", mu_b) * float((sb**2).mean())
    fa, fb = sa / (sa**2 + mua), sb / (sb**2 + mub)
    W = La.T @ U @ RbT.T
    if rank is None:
        return RaT.T @ (W * fa[:, None] * fb[None, :]) @ Lb.T
    u, s, vh = _top_singular(W, _check_rank(rank))
    return (RaT.T @ (u * s * fa[:, None])) @ (vh * fb[None, :] @ Lb.T)


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
