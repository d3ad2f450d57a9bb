"""The closed-form solve against a brute-force solve of the objective's full normal equations."""

import numpy as np
import pytest
import torch

from platonic import InvalidInputError, RidgeSolver, head_design_matrix, relative_residual, solve, solve_reference

SHAPES = [  # (N, M, d): tall, N < d, M < d, both small, square
    (12, 5, 8),
    (6, 4, 10),
    (12, 3, 12),
    (4, 3, 9),
    (10, 10, 10),
    (9, 12, 7),
]


def brute_force(F, G, U, mu_a_rel, mu_b_rel, anchor=None, anchor_weight=1.0):
    """Minimise the objective through its full d^2 x d^2 normal equations, formed explicitly.

    ||F X G^T - U||^2 + mu_b ||F X||^2 + mu_a ||X G^T||^2 + mu_a mu_b ||X||^2 is least squares in
    vec(X) with design D = [G (x) F; sqrt(mu_b) I (x) F; sqrt(mu_a) G (x) I; sqrt(mu_a mu_b) I]; the
    normal equations are D^T D vec(X) = D^T vec([U; 0]). With mu_b = 1e-6 and M < d their condition
    number is about 1e8, so a plain float64 LU solve is only good to about 1e-8. The float64 solution
    is therefore refined with residuals in extended precision (numpy longdouble, classic mixed
    precision iterative refinement), which makes the reference accurate to about 1e-11.

    With `anchor` (F_pool, P x k) the anchored objective adds lambda ||F_pool X G^T||^2 +
    lambda mu_b ||F_pool X||^2, lambda = anchor_weight ||F||^2 / ||F_pool||^2: two more row blocks,
    sqrt(lambda) G (x) F_pool and sqrt(lambda mu_b) I (x) F_pool, with zero right-hand side.
    """
    F, G, U = F.double(), G.double(), U.double()
    k, d = F.shape[1], G.shape[1]
    mu_a = mu_a_rel * float((torch.linalg.svdvals(F) ** 2).mean())
    mu_b = mu_b_rel * float((torch.linalg.svdvals(G) ** 2).mean())
    ld = np.longdouble
    Fl, Gl, Ul = F.numpy().astype(ld), G.numpy().astype(ld), U.numpy().astype(ld)
    # column-major vec: vec(A X B) = (B^T kron A) vec(X)
    blocks = [
        np.kron(Gl, Fl),
        np.sqrt(ld(mu_b)) * np.kron(np.eye(d, dtype=ld), Fl),
        np.sqrt(ld(mu_a)) * np.kron(Gl, np.eye(k, dtype=ld)),
        np.sqrt(ld(mu_a) * ld(mu_b)) * np.eye(k * d, dtype=ld),
    ]
    if anchor is not None:
        Pl = anchor.double().numpy().astype(ld)
        lam = ld(anchor_weight) * (Fl**2).sum() / (Pl**2).sum()
        blocks += [np.sqrt(lam) * np.kron(Gl, Pl), np.sqrt(lam * ld(mu_b)) * np.kron(np.eye(d, dtype=ld), Pl)]
    design = np.concatenate(blocks)
    rhs = np.concatenate([Ul.T.reshape(-1), np.zeros(design.shape[0] - Ul.size, dtype=ld)])
    normal, b = design.T @ design, design.T @ rhs  # (k d, k d), (k d,)
    lu = torch.linalg.lu_factor(torch.from_numpy(normal.astype(np.float64)))
    x = np.zeros(k * d, dtype=ld)
    for _ in range(4):
        r = torch.from_numpy((b - normal @ x).astype(np.float64))
        x = x + torch.linalg.lu_solve(*lu, r[:, None])[:, 0].numpy().astype(ld)
    return torch.from_numpy(x.astype(np.float64)).reshape(d, k).T


def random_grid(gen, n, m, d, dtype=torch.float64):
    F = torch.nn.functional.normalize(torch.randn(n, d, generator=gen, dtype=dtype), dim=1)
    G = torch.nn.functional.normalize(torch.randn(m, d, generator=gen, dtype=dtype), dim=1)
    U = 0.05 * torch.randn(n, m, generator=gen, dtype=dtype)
    return F, G, U


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


@pytest.mark.parametrize("n,m,d", SHAPES)
@pytest.mark.parametrize("mus", [(1e-2, 1e-6), (0.3, 1e-3)])
def test_solve_matches_brute_force_normal_equations(gen, n, m, d, mus):
    F, G, U = random_grid(gen, n, m, d)
    expected = brute_force(F, G, U, *mus)
    assert rel(solve(F, G, U, *mus), expected) < 1e-9


@pytest.mark.parametrize("n,m,d", SHAPES)
def test_reference_two_svd_formula_matches_brute_force(gen, n, m, d):
    F, G, U = random_grid(gen, n, m, d)
    assert rel(solve_reference(F, G, U), brute_force(F, G, U, 1e-2, 1e-6)) < 1e-9


@pytest.mark.parametrize("n,m,d", SHAPES)
def test_solve_is_linear_in_u(gen, n, m, d):
    F, G, U1 = random_grid(gen, n, m, d)
    U2 = torch.randn(n, m, generator=gen, dtype=torch.float64)
    a, b = 0.7, -2.3
    lhs = solve(F, G, a * U1 + b * U2)
    rhs = a * solve(F, G, U1) + b * solve(F, G, U2)
    assert rel(lhs, rhs) < 1e-10


@pytest.mark.parametrize("n,m,d", SHAPES)
def test_ridge_solver_equals_solve(gen, n, m, d):
    F, G, U = random_grid(gen, n, m, d)
    solver = RidgeSolver(F, G)
    assert torch.equal(solver.solve(U), solve(F, G, U))
    many = solver.solve_many([U, 2 * U, -U])
    assert many.shape == (3, d, d)
    for got, c in zip(many, (1, 2, -1)):
        assert rel(got, c * solve(F, G, U)) < 1e-12


@pytest.mark.parametrize("n,m,d,rank", [(12, 5, 8, 3), (6, 4, 10, 2), (12, 12, 6, 4)])
def test_rank_capped_solve_matches_truncated_svds(gen, n, m, d, rank):
    F, G, U = random_grid(gen, n, m, d)
    got = solve(F, G, U, rank=rank)
    assert rel(got, solve_reference(F, G, U, rank=rank)) < 1e-9
    assert torch.linalg.matrix_rank(got) <= rank


def test_float32_in_float32_out_float64_inside(gen):
    F, G, U = random_grid(gen, 50, 6, 16, dtype=torch.float32)
    X = solve(F, G, U)
    assert X.dtype == torch.float32
    assert rel(X, solve_reference(F, G, U)) < 1e-6


def test_zero_descriptor_gives_zero_operator(gen):
    F, G, _ = random_grid(gen, 20, 4, 8)
    assert torch.count_nonzero(solve(F, G, torch.zeros(20, 4, dtype=torch.float64))) == 0


def test_head_design_matrix_form_solves_head_update(gen):
    """The general design-matrix form: H = [u; 1] / ||z|| in place of F gives B (p + 1, d)."""
    n, p, m, d = 30, 6, 5, 8
    u = torch.randn(n, p, generator=gen, dtype=torch.float64)
    z = torch.randn(n, d, generator=gen, dtype=torch.float64)
    G = torch.nn.functional.normalize(torch.randn(m, d, generator=gen, dtype=torch.float64), dim=1)
    H = head_design_matrix(u, z)
    assert H.shape == (n, p + 1)
    assert torch.allclose(H[:, -1] * z.norm(dim=1), torch.ones(n, dtype=torch.float64))
    B_true = 0.01 * torch.randn(p + 1, d, generator=gen, dtype=torch.float64)
    U = H @ B_true @ G.T
    B = solve(H, G, U, mu_a=1e-8, mu_b=1e-8)
    assert B.shape == (p + 1, d)
    assert relative_residual(H, G, B, U) < 1e-4


def test_relative_residual_of_exact_fit_is_zero(gen):
    F, G, _ = random_grid(gen, 20, 4, 8)
    X = torch.randn(8, 8, generator=gen, dtype=torch.float64)
    assert relative_residual(F, G, X, F @ X @ G.T) < 1e-12


@pytest.mark.parametrize(
    "args,match",
    [
        ((torch.randn(5), torch.randn(3, 4), torch.randn(5, 3)), "F .*2-D matrix"),
        ((torch.randn(5, 4), torch.randn(3, 4), torch.randn(4, 3)), "U .*rows; expected 5"),
        ((torch.randn(5, 4), torch.randn(3, 4), torch.randn(5, 2)), "U .*columns; expected 3"),
        ((torch.full((5, 4), float("nan")), torch.randn(3, 4), torch.randn(5, 3)), "F .*NaN/Inf"),
        ((torch.randn(5, 4), torch.randn(3, 4), torch.tensor([[float("inf")] * 3] * 5)), "U .*NaN/Inf"),
        ((torch.zeros(0, 4), torch.randn(3, 4), torch.randn(0, 3)), "F .*empty"),
        ((torch.zeros(5, 4), torch.randn(3, 4), torch.randn(5, 3)), "F is all zeros"),
    ],
)
def test_solve_rejects_bad_input_with_named_problem(args, match):
    with pytest.raises(InvalidInputError, match=match):
        solve(*args)


def test_solve_rejects_mismatched_embedding_widths():
    F, G, U = torch.randn(5, 4), torch.randn(3, 6), torch.randn(5, 3)
    X = solve(F, G, U)  # k != d is the head form: allowed, X is (k, d)
    assert X.shape == (4, 6)


@pytest.mark.parametrize("kw,match", [({"mu_a": 0.0}, "mu_a must be > 0"), ({"mu_b": -1.0}, "mu_b must be > 0"),
                                      ({"mu_a": float("nan")}, "mu_a must be finite"), ({"rank": 0}, "rank must be")])
def test_solve_rejects_bad_hyperparameters(kw, match):
    with pytest.raises(InvalidInputError, match=match):
        solve(torch.randn(5, 4), torch.randn(3, 4), torch.randn(5, 3), **kw)


# -- rank caps ---------------------------------------------------------------------------------------

def absolute_mus(F, G, mu_a_rel=1e-2, mu_b_rel=1e-6):
    return (mu_a_rel * float((torch.linalg.svdvals(F.double()) ** 2).mean()),
            mu_b_rel * float((torch.linalg.svdvals(G.double()) ** 2).mean()))


def objective(F, G, U, X, mu_a, mu_b, anchor=None, lam=0.0):
    """The ridge objective written out term by term (absolute weights), float64."""
    X = X.double()
    j = ((F @ X @ G.T - U) ** 2).sum() + mu_b * ((F @ X) ** 2).sum() + mu_a * ((X @ G.T) ** 2).sum() + mu_a * mu_b * (X**2).sum()
    if anchor is not None:
        j = j + lam * ((anchor @ X @ G.T) ** 2).sum() + lam * mu_b * ((anchor @ X) ** 2).sum()
    return float(j)


def best_rank(M, r):
    u, s, vh = torch.linalg.svd(M, full_matrices=False)
    return (u[:, :r] * s[:r]) @ vh[:r]


def sym_power(S, p):
    evals, vecs = torch.linalg.eigh(S)
    return (vecs * evals**p) @ vecs.T


def factor_truncation(F, G, U, r, mu_a_rel=1e-2, mu_b_rel=1e-6):
    """The former rank cap: the top r singular directions of each factor, X = R_a[:r] C[:r, :r] L_b[:r]^T."""
    La, sa, RaT = torch.linalg.svd(F, full_matrices=False)
    Lb, sb, RbT = torch.linalg.svd(G.T, full_matrices=False)
    mu_a, mu_b = absolute_mus(F, G, mu_a_rel, mu_b_rel)
    core = (La.T @ U @ RbT.T) * (sa / (sa**2 + mu_a))[:, None] * (sb / (sb**2 + mu_b))[None, :]
    return RaT.T[:, :r] @ core[:r, :r] @ Lb[:, :r].T


def rank_r_search(F, G, U, r, mu_a, mu_b, gen, anchor=None, lam=0.0, starts=12, sweeps=300):
    """Brute-force min of the objective over X = P Q^T (P (k, r), Q (d, r)) by alternating least squares.

    Each half-step minimises the objective exactly in one factor: with the quadratic form written
    from its terms, Aq = F^T F + mu_a I + lam F_pool^T F_pool, Bq = G^T G + mu_b I, the objective is
    tr(Q P^T Aq P Q^T Bq) - 2 tr(Q P^T F^T U G) + const, so P = Aq^{-1} F^T U G Q (Q^T Bq Q)^{-1} and
    symmetrically for Q. Random starts; returns the best objective found.
    """
    k, d = F.shape[1], G.shape[1]
    Aq = F.T @ F + mu_a * torch.eye(k, dtype=torch.float64)
    if anchor is not None:
        Aq = Aq + lam * anchor.T @ anchor
    Bq = G.T @ G + mu_b * torch.eye(d, dtype=torch.float64)
    C = F.T @ U @ G  # (k, d)
    best = float("inf")
    for _ in range(starts):
        Q = torch.randn(d, r, generator=gen, dtype=torch.float64)
        for _ in range(sweeps):
            P = torch.linalg.solve(Aq, C @ Q) @ torch.linalg.inv(Q.T @ Bq @ Q)
            Q = torch.linalg.solve(Bq, C.T @ P) @ torch.linalg.inv(P.T @ Aq @ P)
        best = min(best, objective(F, G, U, P @ Q.T, mu_a, mu_b, anchor, lam))
    return best


RANK_CASES = [(12, 5, 8, 3), (6, 4, 10, 2), (12, 12, 6, 4), (40, 8, 16, 4), (9, 12, 7, 1)]


@pytest.mark.parametrize("n,m,d,rank", RANK_CASES)
def test_paper_rank_cap_is_the_solve_of_the_rank_r_projected_descriptor(gen, n, m, d, rank):
    """Paper truncation: X_r = X*(U_r) with U_r = L_a [L_a^T U R_b]_r R_b^T (the reference code's rank_capped_solve)."""
    F, G, U = random_grid(gen, n, m, d)
    La, _, _ = torch.linalg.svd(F, full_matrices=False)
    _, _, RbT = torch.linalg.svd(G.T, full_matrices=False)
    U_r = La @ best_rank(La.T @ U @ RbT.T, rank) @ RbT
    got = solve(F, G, U, rank=rank)
    assert rel(got, solve(F, G, U_r)) < 1e-9
    assert torch.linalg.matrix_rank(got) <= rank


@pytest.mark.parametrize("n,m,d,rank", RANK_CASES)
def test_optimal_rank_cap_is_whitened_eckart_young_of_brute_force_solution(gen, n, m, d, rank):
    """J(X) = ||A^{1/2} (X - X*) B^{1/2}||^2 + J(X*), so the optimum is A^{-1/2} [A^{1/2} X* B^{1/2}]_r B^{-1/2}."""
    F, G, U = random_grid(gen, n, m, d)
    mu_a, mu_b = absolute_mus(F, G)
    A = F.T @ F + mu_a * torch.eye(d, dtype=torch.float64)
    B = G.T @ G + mu_b * torch.eye(d, dtype=torch.float64)
    X_star = brute_force(F, G, U, 1e-2, 1e-6)
    expected = sym_power(A, -0.5) @ best_rank(sym_power(A, 0.5) @ X_star @ sym_power(B, 0.5), rank) @ sym_power(B, -0.5)
    got = solve(F, G, U, rank=rank, truncation="optimal")
    assert rel(got, expected) < 1e-7
    assert torch.linalg.matrix_rank(got) <= rank
    # (*) itself: the objective is the weighted distance to X* plus J(X*)
    weighted = float((sym_power(A, 0.5) @ (got - X_star) @ sym_power(B, 0.5)).square().sum())
    assert objective(F, G, U, got, mu_a, mu_b) == pytest.approx(weighted + objective(F, G, U, X_star, mu_a, mu_b), rel=1e-9)


@pytest.mark.parametrize("n,m,d,rank", [(12, 5, 8, 2), (6, 4, 10, 2), (20, 6, 7, 3)])
@pytest.mark.parametrize("anchored", [False, True])
def test_optimal_rank_cap_is_not_beaten_by_a_brute_force_rank_r_search(gen, n, m, d, rank, anchored):
    """Alternating least squares over rank-r factors from many starts finds X_r's objective, never less."""
    F, G, U = random_grid(gen, n, m, d)
    mu_a_rel, mu_b_rel = 3e-3, 3e-3  # a mild ridge on both sides, so that ALS converges in few sweeps
    mu_a, mu_b = absolute_mus(F, G, mu_a_rel, mu_b_rel)
    pool = torch.nn.functional.normalize(torch.randn(15, d, generator=gen, dtype=torch.float64), dim=1) if anchored else None
    solver = RidgeSolver(F, G, mu_a=mu_a_rel, mu_b=mu_b_rel, rank=rank, truncation="optimal", anchor=pool, anchor_weight=0.5)
    lam = solver.anchor_weight_absolute or 0.0
    X_r = solver.solve(U)
    j_r = objective(F, G, U, X_r, mu_a, mu_b, pool, lam)
    j_search = rank_r_search(F, G, U, rank, mu_a, mu_b, gen, pool, lam)
    assert j_search >= j_r * (1 - 1e-10)
    assert j_search <= j_r * (1 + 1e-6)  # the search is good enough to have found it


@pytest.mark.parametrize("n,m,d,rank", RANK_CASES)
def test_rank_caps_against_the_former_factor_truncation(gen, n, m, d, rank):
    """Objective order: optimal <= paper and optimal <= factor truncation (theorems, by (*));
    paper <= factor truncation (measured: holds on these problems and on 300 random ones, not a theorem)."""
    F, G, U = random_grid(gen, n, m, d)
    mu_a, mu_b = absolute_mus(F, G)
    j_opt = objective(F, G, U, solve(F, G, U, rank=rank, truncation="optimal"), mu_a, mu_b)
    j_paper = objective(F, G, U, solve(F, G, U, rank=rank), mu_a, mu_b)
    j_factor = objective(F, G, U, factor_truncation(F, G, U, rank), mu_a, mu_b)
    assert j_opt <= j_paper * (1 + 1e-12)
    assert j_opt <= j_factor * (1 + 1e-12)
    assert j_paper <= j_factor * (1 + 1e-12)


def test_paper_rank_cap_is_not_exactly_optimal_for_the_ridge_objective(gen):
    F, G, U = random_grid(gen, 12, 5, 8)
    mu_a, mu_b = absolute_mus(F, G, 0.3, 1e-3)
    j_opt = objective(F, G, U, solve(F, G, U, 0.3, 1e-3, rank=2, truncation="optimal"), mu_a, mu_b)
    j_paper = objective(F, G, U, solve(F, G, U, 0.3, 1e-3, rank=2), mu_a, mu_b)
    assert j_paper > j_opt * (1 + 1e-6)


@pytest.mark.parametrize("truncation", ["paper", "optimal"])
def test_rank_cap_applies_per_operator_and_is_not_linear(gen, truncation):
    F, G, U = random_grid(gen, 12, 5, 8)
    V = torch.randn(12, 5, generator=gen, dtype=torch.float64)
    solver = RidgeSolver(F, G, rank=2, truncation=truncation)
    many = solver.solve_many([U, V])
    assert torch.equal(many[0], solver.solve(U)) and torch.equal(many[1], solver.solve(V))
    assert rel(solver.solve(U + V), many[0] + many[1]) > 1e-3


def test_rank_cap_at_full_rank_is_the_uncapped_solve(gen):
    F, G, U = random_grid(gen, 12, 5, 8)
    for truncation in ("paper", "optimal"):
        assert rel(solve(F, G, U, rank=5, truncation=truncation), solve(F, G, U)) < 1e-9


# -- anchored solve ----------------------------------------------------------------------------------

def random_pool(gen, p, k):
    return torch.nn.functional.normalize(torch.randn(p, k, generator=gen, dtype=torch.float64), dim=1)


@pytest.mark.parametrize("n,m,d", SHAPES)
@pytest.mark.parametrize("weight", [1.0, 0.1, 10.0])
def test_anchored_solve_matches_brute_force_normal_equations(gen, n, m, d, weight):
    F, G, U = random_grid(gen, n, m, d)
    pool = random_pool(gen, 7, d)
    expected = brute_force(F, G, U, 1e-2, 1e-6, anchor=pool, anchor_weight=weight)
    assert rel(solve(F, G, U, anchor=pool, anchor_weight=weight), expected) < 1e-10


@pytest.mark.parametrize("n,m,d", SHAPES)
def test_anchored_solve_is_linear_in_u(gen, n, m, d):
    F, G, U1 = random_grid(gen, n, m, d)
    U2 = torch.randn(n, m, generator=gen, dtype=torch.float64)
    solver = RidgeSolver(F, G, anchor=random_pool(gen, 9, d))
    a, b = 0.7, -2.3
    assert rel(solver.solve(a * U1 + b * U2), a * solver.solve(U1) + b * solver.solve(U2)) < 1e-12
    many = solver.solve_many([U1, U2])
    assert rel(many[0], solver.solve(U1)) < 1e-12 and rel(many[1], solver.solve(U2)) < 1e-12


def test_anchor_weight_is_relative_to_the_probes(gen):
    """lambda = w ||F||^2 / ||F_pool||^2: a pool given twice over is the same anchor."""
    F, G, U = random_grid(gen, 20, 5, 8)
    pool = random_pool(gen, 6, 8)
    solver = RidgeSolver(F, G, anchor=pool, anchor_weight=2.0)
    assert solver.kind == "anchored" and solver.n_anchor == 6
    assert solver.anchor_weight_absolute == pytest.approx(2.0 * float(F.square().sum()) / float(pool.square().sum()))
    assert rel(solver.solve(U), solve(F, G, U, anchor=torch.cat([pool, pool]), anchor_weight=2.0)) < 1e-12
    assert RidgeSolver(F, G).kind == "paper" and RidgeSolver(F, G).anchor_weight_absolute is None


def test_anchored_solve_moves_the_pool_less(gen):
    F, G, U = random_grid(gen, 20, 5, 8)
    pool = random_pool(gen, 30, 8)
    paper, anchored = solve(F, G, U), solve(F, G, U, anchor=pool, anchor_weight=1.0)
    assert (pool @ anchored @ G.T).norm() < 0.8 * (pool @ paper @ G.T).norm()


def test_anchored_head_design_matrix_form(gen):
    """For a head edit the pool goes through the same map: rows [u; 1] / ||z|| of the pool's inputs."""
    n, p, m, d = 14, 5, 4, 6
    H = head_design_matrix(torch.randn(n, p, generator=gen, dtype=torch.float64), torch.randn(n, d, generator=gen, dtype=torch.float64))
    H_pool = head_design_matrix(torch.randn(8, p, generator=gen, dtype=torch.float64), torch.randn(8, d, generator=gen, dtype=torch.float64))
    G = torch.nn.functional.normalize(torch.randn(m, d, generator=gen, dtype=torch.float64), dim=1)
    U = 0.05 * torch.randn(n, m, generator=gen, dtype=torch.float64)
    B = solve(H, G, U, anchor=H_pool)
    assert B.shape == (p + 1, d)
    assert rel(B, brute_force(H, G, U, 1e-2, 1e-6, anchor=H_pool)) < 1e-10


def test_anchored_float32_in_float32_out(gen):
    F, G, U = random_grid(gen, 30, 5, 8, dtype=torch.float32)
    pool = random_pool(gen, 6, 8).float()
    X = solve(F, G, U, anchor=pool)
    assert X.dtype == torch.float32
    assert rel(X, solve(F.double(), G.double(), U.double(), anchor=pool.double())) < 1e-6


@pytest.mark.parametrize("kw,match", [
    ({"anchor": torch.randn(3, 5)}, "anchor .*columns; expected 4"),
    ({"anchor": torch.zeros(3, 4)}, "anchor pool's design rows are all zeros"),
    ({"anchor": torch.randn(3, 4), "anchor_weight": 0.0}, "anchor_weight must be > 0"),
    ({"anchor": torch.randn(3, 4), "rank": 2}, "truncation='optimal'"),
    ({"truncation": "best"}, "truncation must be one of"),
])
def test_solve_rejects_bad_anchor_and_truncation(kw, match):
    with pytest.raises(InvalidInputError, match=match):
        solve(torch.randn(5, 4), torch.randn(3, 4), torch.randn(5, 3), **kw)
