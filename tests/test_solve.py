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


def brute_force(F, G, U, mu_a_rel, mu_b_rel):
    """Minimise the objective through its full d^2 x d^2 normal equations, formed explicitly.

    ||F X G^T - U||^2 + mu_b ||F X||^2 + mu_a ||X G^T||^2 + mu_a mu_b ||X||^2 is least squares in
    vec(X) with design D = [G (x) F; sqrt(mu_b) I (x) F; sqrt(mu_a) G (x) I; sqrt(mu_a mu_b) I]; the
    normal equations are D^T D vec(X) = D^T vec([U; 0]). With mu_b = 1e-6 and M < d their condition
    number is about 1e8, so a plain float64 LU solve is only good to about 1e-8. The float64 solution
    is therefore refined with residuals in extended precision (numpy longdouble, classic mixed
    precision iterative refinement), which makes the reference accurate to about 1e-11.
    """
    F, G, U = F.double(), G.double(), U.double()
    k, d = F.shape[1], G.shape[1]
    mu_a = mu_a_rel * float((torch.linalg.svdvals(F) ** 2).mean())
    mu_b = mu_b_rel * float((torch.linalg.svdvals(G) ** 2).mean())
    ld = np.longdouble
    Fl, Gl, Ul = F.numpy().astype(ld), G.numpy().astype(ld), U.numpy().astype(ld)
    # column-major vec: vec(A X B) = (B^T kron A) vec(X)
    design = np.concatenate([
        np.kron(Gl, Fl),
        np.sqrt(ld(mu_b)) * np.kron(np.eye(d, dtype=ld), Fl),
        np.sqrt(ld(mu_a)) * np.kron(Gl, np.eye(k, dtype=ld)),
        np.sqrt(ld(mu_a) * ld(mu_b)) * np.eye(k * d, dtype=ld),
    ])
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
