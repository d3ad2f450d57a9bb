"""Folding into each edit-site form changes embeddings exactly as predicted; unfold restores them."""

import pytest
import torch
from torch import nn

from platonic import (
    AppendedLinearSite,
    EditSiteError,
    HeadAffineSite,
    LinearSite,
    Operator,
    ProjectionParameter,
    fold,
    unfold,
    unfold_by_inversion,
)
from platonic.bank import Term

torch.manual_seed(0)
W, D, P = 12, 8, 10  # tower width, embedding width, head hidden width
ALPHA = 0.5


def rel(a, b):
    return float((a - b).norm() / b.norm())


def linear_operator(d=D, seed=0, target="fp"):
    g = torch.Generator().manual_seed(seed)
    return Operator(delta=0.3 * torch.randn(d, d, generator=g), form="linear", target=target, terms=(Term(1.0, "s", "t"),))


class ProjTower(nn.Module):  # open_clip ViT: z = x @ proj
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, W)
        self.proj = nn.Parameter(torch.randn(W, D))

    def forward(self, x):
        return self.body(x) @ self.proj


class LinearTower(nn.Module):  # HF visual_projection (no bias) / timm head (bias)
    def __init__(self, bias):
        super().__init__()
        self.body = nn.Linear(6, W)
        self.head = nn.Linear(W, D, bias=bias)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))


class ResidualHeadTower(nn.Module):  # SigLIP: z = a + fc2(gelu(fc1(norm(a))))
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, D)
        self.norm = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, P)
        self.fc2 = nn.Linear(P, D)

    def hidden(self, x):
        a = self.body(x)
        return a, torch.nn.functional.gelu(self.fc1(self.norm(a)))

    def forward(self, x):
        a, u = self.hidden(x)
        return a + self.fc2(u)


class NoLinearTower(nn.Module):  # ends in a non-linear block
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, D), nn.GELU())

    def forward(self, x):
        return self.body(x)


X = torch.randn(32, 6)


@pytest.mark.parametrize("make_tower,make_site", [
    (ProjTower, lambda t: ProjectionParameter(t, "proj")),
    (lambda: LinearTower(bias=False), lambda t: LinearSite(t.head)),
    (lambda: LinearTower(bias=True), lambda t: LinearSite(t.head)),
    (NoLinearTower, lambda t: AppendedLinearSite.install(t, "body", D)),
], ids=["x@proj", "linear-no-bias", "linear-bias", "appended-linear"])
def test_projection_forms_map_z_to_I_plus_alpha_A_z(make_tower, make_site):
    tower = make_tower()
    with torch.no_grad():
        z0 = tower(X)
        site = make_site(tower)
        assert torch.allclose(tower(X), z0)  # installing a site changes nothing
        op = linear_operator()
        record = fold(site, op, ALPHA)
        z1 = tower(X)
        predicted = z0 @ (torch.eye(D) + ALPHA * op.delta).T
        assert rel(z1, predicted) < 1e-5
        assert unfold(record) == "exact"
        assert torch.equal(tower(X), z0)
        fold(site, op, ALPHA)
        assert unfold_by_inversion(site, op, ALPHA) == "inverted"
        assert rel(tower(X), z0) < 1e-6


def test_head_affine_maps_z_to_z_plus_alpha_dW_u_plus_db():
    tower = ResidualHeadTower()
    with torch.no_grad():
        z0 = tower(X)
        _, u = tower.hidden(X)
        B = 0.1 * torch.randn(P + 1, D)
        op = Operator(delta=B, form="head_affine", target="fp", terms=(Term(1.0, "s", "t"),))
        site = HeadAffineSite(tower.fc2)
        record = fold(site, op, ALPHA)
        predicted = z0 + ALPHA * (torch.cat([u, torch.ones(len(u), 1)], dim=1) @ B)
        assert rel(tower(X), predicted) < 1e-5
        unfold(record)
        assert torch.equal(tower(X), z0)
        fold(site, op, ALPHA)
        unfold_by_inversion(site, op, ALPHA)
        assert rel(tower(X), z0) < 1e-6


def test_fold_keeps_dtype_parameter_count_and_architecture():
    tower = LinearTower(bias=True).to(torch.float64)
    n_before = sum(p.numel() for p in tower.parameters())
    fold(LinearSite(tower.head), linear_operator(), ALPHA)
    assert tower.head.weight.dtype == torch.float64
    assert sum(p.numel() for p in tower.parameters()) == n_before


def test_appended_linear_installs_once_and_removes_cleanly():
    tower = NoLinearTower()
    inner = tower.body
    site = AppendedLinearSite.install(tower, "body", D)
    again = AppendedLinearSite.install(tower, "body", D)
    assert again.linear is site.linear
    site.remove()
    assert tower.body is inner


def test_fold_rejects_operators_that_do_not_fit():
    tower = ProjTower()
    site = ProjectionParameter(tower, "proj")
    with pytest.raises(EditSiteError, match=r"needs \(8, 8\); it was solved for another model"):
        fold(site, linear_operator(d=5), ALPHA)
    head = Operator(delta=torch.zeros(P + 1, D), form="head_affine", target="fp", terms=())
    with pytest.raises(EditSiteError, match="takes a 'linear' operator but got a 'head_affine'"):
        fold(site, head, ALPHA)
    with pytest.raises(EditSiteError, match="needs an affine with a bias"):
        HeadAffineSite(nn.Linear(P, D, bias=False))
    with pytest.raises(EditSiteError, match="no tensor attribute 'proj'"):
        ProjectionParameter(nn.Linear(2, 2), "proj")
    with pytest.raises(Exception, match="alpha must be finite"):
        fold(site, linear_operator(), float("nan"))


@pytest.mark.parametrize("make_tower,make_site", [
    (ProjTower, lambda t: ProjectionParameter(t, "proj")),
    (lambda: LinearTower(bias=True), lambda t: LinearSite(t.head)),
    (NoLinearTower, lambda t: AppendedLinearSite.install(t, "body", D)),
    (ResidualHeadTower, lambda t: HeadAffineSite(t.fc2)),
], ids=["x@proj", "linear-bias", "appended-linear", "head-affine"])
def test_each_site_owns_its_design_matrix_and_embedding_change(make_tower, make_site):
    """design_matrix: F = z / ||z|| (N, d) or H = [u; 1] / ||z|| (N, p + 1); embedding_change: the D
    with fold(delta, alpha): z -> z + alpha D, read off the site's own captured inputs."""
    from platonic.edit import ProbeEmbeddings
    from platonic.solve import head_design_matrix

    tower = make_tower()
    site = make_site(tower)
    captured = []
    hook = site.watch_inputs(captured)
    with torch.no_grad():
        z0 = tower(X)
    if hook is not None:
        hook.remove()
    emb = ProbeEmbeddings(z0, captured[0] if captured else None)
    assert (emb.u is not None) == (site.form == "head_affine")
    H = site.design_matrix(emb)
    if site.form == "head_affine":
        assert torch.equal(H, head_design_matrix(emb.u.double(), z0.double())) and H.shape == (len(X), P + 1)
    else:
        assert torch.equal(H, torch.nn.functional.normalize(z0.double(), dim=1)) and H.shape == (len(X), D)
    delta = 0.1 * torch.randn(site.expected_delta_shape(), generator=torch.Generator().manual_seed(3))
    op = Operator(delta=delta, form=site.form, target="fp", terms=(Term(1.0, "s", "t"),))
    change = site.embedding_change(emb, delta)
    assert change.shape == z0.shape and change.dtype == z0.dtype
    with torch.no_grad():
        record = fold(site, op, ALPHA)
        assert rel(tower(X), z0 + ALPHA * change) < 1e-5
        unfold(record)
    with pytest.raises(EditSiteError, match="takes a delta of shape"):
        site.embedding_change(emb, torch.zeros(3, 3))


@pytest.mark.parametrize("make_site,form", [
    (lambda: ProjectionParameter(ProjTower(), "proj"), "linear"),
    (lambda: LinearSite(LinearTower(bias=True).head), "linear"),
    (lambda: AppendedLinearSite.install(NoLinearTower(), "body", D), "linear"),
    (lambda: HeadAffineSite(ResidualHeadTower().fc2), "head_affine"),
], ids=["x@proj", "linear-bias", "appended-linear", "head-affine"])
def test_check_fold_bounds_the_change_without_folding_and_refuses_what_fold_refuses(make_site, form):
    """`edit.check_fold` skips the fold when `EditSite.change_bound` shows it cannot be refused: the bound must
    hold (measured ratio <= bound) on every site kind, and a strength `fold` refuses must still be refused."""
    from platonic.edit import MAX_RELATIVE_CHANGE, check_fold

    site = make_site()
    shape = site.expected_delta_shape()
    g = torch.Generator().manual_seed(3)
    for scale in (1e-3, 0.3, 5.0):
        op = Operator(delta=scale * torch.randn(*shape, generator=g), form=form, target="fp", terms=(Term(1.0, "s", "t"),))
        for alpha in (-1.0, 0.5, 7.0):
            before = {k: t.detach().clone() for k, t in site.tensors().items()}
            record = fold(site, op, alpha)
            after = site.tensors()
            ratio = sum(float((after[k].double() - before[k].double()).norm()) ** 2 for k in before) ** 0.5 / \
                sum(float(before[k].double().norm()) ** 2 for k in before) ** 0.5
            unfold(record)
            assert ratio <= site.change_bound(op.delta, alpha) * (1 + 1e-6) + 1e-9
    huge = Operator(delta=torch.randn(*shape, generator=g), form=form, target="fp", terms=(Term(1.0, "s", "t"),))
    kept = {k: t.detach().clone() for k, t in site.tensors().items()}
    with pytest.raises(EditSiteError, match="times their norm"):
        check_fold(site, huge, 1e30)
    overflow = Operator(delta=torch.full(shape, 1e30), form=form, target="fp", terms=(Term(1.0, "s", "t"),))
    with pytest.raises(EditSiteError, match="non-finite|times their norm"):  # (an operator with NaN is never made)
        check_fold(site, overflow, 1e9)
    check_fold(site, huge, 1e-3 * MAX_RELATIVE_CHANGE / max(site.change_bound(huge.delta, 1.0), 1e-30))  # skipped: no fold
    assert all(torch.equal(kept[k], t) for k, t in site.tensors().items())  # weights untouched throughout
