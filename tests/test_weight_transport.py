"""GradFix and Theseus (platonic.weight_transport) against brute-force references on tiny models."""

import copy
import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from platonic import InvalidInputError, TaskVector
from platonic.experiments.setups.toy import ToyDualEncoder, toy_setup
from platonic.weight_transport import TheseusMaps, gradfix_mask, gradient_signs, procrustes


@pytest.fixture(scope="module")
def toy():
    return toy_setup(widths=((16, 8), (16, 8)))


def _loss(model, tower, x, y, prompts, scale):
    head = F.normalize(model.encode_texts(list(prompts)).float(), dim=1)
    return F.cross_entropy(scale * F.normalize(tower(x).float(), dim=1) @ head.T, y, reduction="sum")


def test_gradient_signs_are_the_per_image_majority_of_the_descent_signs(toy):
    model, spec = toy.models["m0"], toy.tasks["t0"]
    x, y = spec.test.inputs[::9], spec.test.labels[::9]
    signs = gradient_signs(model, x, y, spec.prompts, logit_scale=20.0)
    tower = copy.deepcopy(model.tower)
    votes = {k: torch.zeros_like(p) for k, p in tower.named_parameters()}
    for i in range(len(x)):  # brute force: one backward per image, on a plain copy of the tower
        tower.zero_grad()
        _loss(model, tower, x[i : i + 1], y[i : i + 1], spec.prompts, 20.0).backward()
        for k, p in tower.named_parameters():
            votes[k] += torch.sign(-p.grad)
    assert set(signs) == set(votes)
    assert all(torch.equal(signs[k], torch.sign(votes[k])) for k in votes)
    mean = gradient_signs(model, x, y, spec.prompts, vote="mean", logit_scale=20.0)
    tower.zero_grad()
    _loss(model, tower, x, y, spec.prompts, 20.0).backward()
    assert all(torch.equal(mean[k], torch.sign(-p.grad)) for k, p in tower.named_parameters())
    with pytest.raises(InvalidInputError, match="vote"):
        gradient_signs(model, x, y, spec.prompts, vote="max")


def test_gradfix_keeps_the_entries_that_agree_with_a_known_sign_mask():
    tau = TaskVector({"w": torch.tensor([[1.0, -2.0], [3.0, -4.0]]), "b": torch.tensor([0.5, -0.5]), "free": torch.ones(2)})
    signs = {"w": torch.tensor([[1.0, 1.0], [-1.0, -1.0]]), "b": torch.tensor([0.0, -1.0])}
    masked = gradfix_mask(tau, signs).deltas
    assert masked["w"].tolist() == [[1.0, 0.0], [0.0, -4.0]]
    assert masked["b"].tolist() == [0.0, -0.5]  # a zero vote drops the entry
    assert masked["free"].tolist() == [1.0, 1.0]  # no signs: kept, as the authors' code does


def test_gradfix_with_the_mean_vote_is_a_first_order_descent_direction(toy):
    """The paper's guarantee: m * tau has a non-positive inner product with the gradient (mean vote)."""
    model, spec = toy.models["m1"], toy.tasks["t1"]
    x, y = spec.test.inputs, spec.test.labels
    g = torch.Generator().manual_seed(3)
    tau = TaskVector({k: torch.randn(p.shape, generator=g) for k, p in model.tower.named_parameters()})
    masked = gradfix_mask(tau, gradient_signs(model, x, y, spec.prompts, vote="mean", logit_scale=20.0))
    tower = copy.deepcopy(model.tower)
    _loss(model, tower, x, y, spec.prompts, 20.0).backward()
    grads = dict(tower.named_parameters())
    assert sum(float((masked.deltas[k] * grads[k].grad).sum()) for k in grads) < 0
    assert sum(float((tau.deltas[k] * grads[k].grad).sum()) for k in grads) != pytest.approx(0)
    with torch.no_grad():
        base = float(_loss(model, model.tower, x, y, spec.prompts, 20.0))
    step = masked.apply_to(model.tower, 1e-3)
    assert float(_loss(model, step, x, y, spec.prompts, 20.0)) < base


def test_procrustes_is_the_best_rotation_by_brute_force():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(20, 2, generator=g, dtype=torch.float64)
    b = a @ torch.tensor([[0.6, -0.8], [0.8, 0.6]], dtype=torch.float64) + 0.1 * torch.randn(20, 2, generator=g, dtype=torch.float64)
    t = procrustes(a, b)
    assert torch.allclose(t.T @ t, torch.eye(2, dtype=torch.float64), atol=1e-12)
    best = min(float(torch.linalg.norm(a @ torch.tensor([[math.cos(th), -s * math.sin(th)], [math.sin(th), s * math.cos(th)]],
                                                        dtype=torch.float64) - b))
               for th in torch.linspace(0, 2 * math.pi, 20001).tolist() for s in (1.0, -1.0))
    assert float(torch.linalg.norm(a @ t - b)) <= best + 1e-6


def test_theseus_closed_form_is_the_least_squares_functional_match():
    """With target activations X_t = X_s T_in (T_in orthogonal), dW_t = T_out^T dW_s T_in is the least-squares
    solution of X_t dW_t^T = (X_s dW_s^T) T_out: the target's layer change reproduces the source's, mapped."""
    g = torch.Generator().manual_seed(1)
    x_s = torch.randn(50, 4, generator=g, dtype=torch.float64)
    t_in = torch.linalg.qr(torch.randn(4, 4, generator=g, dtype=torch.float64))[0]
    t_out = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))[0]
    dw_s = torch.randn(3, 4, generator=g, dtype=torch.float64)
    x_t = x_s @ t_in
    lstsq = torch.linalg.lstsq(x_t, x_s @ dw_s.T @ t_out).solution.T
    recovered_in = procrustes(x_s, x_t)
    assert torch.allclose(recovered_in, t_in, atol=1e-10)
    assert torch.allclose(t_out.T @ dw_s @ recovered_in, lstsq, atol=1e-10)


def _permuted(model: ToyDualEncoder, perm: torch.Tensor) -> ToyDualEncoder:
    """The same function with its hidden units in another order (another basis of the same layer)."""
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.tower[0].weight.copy_(model.tower[0].weight[perm])
        other.tower[0].bias.copy_(model.tower[0].bias[perm])
        other.tower[2].weight.copy_(model.tower[2].weight[:, perm])
    return other


def test_theseus_moves_a_fine_tune_exactly_between_two_bases_of_one_function(toy):
    source, spec = toy.models["m0"], toy.tasks["t0"]
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(5))
    target = _permuted(source, perm)
    g = torch.Generator().manual_seed(2)
    tau = TaskVector({k: 0.1 * torch.randn(p.shape, generator=g) for k, p in source.tower.named_parameters()})
    maps = TheseusMaps(source, target, spec.probes)
    moved, report = maps.transport(tau)
    assert report["zeroed"] == [] and report["zeroed_share"] == 0
    assert torch.allclose(maps.maps[("0", "out")], torch.eye(16, dtype=torch.float64)[:, perm], atol=1e-8)
    x = spec.test.inputs
    with torch.no_grad():
        want = tau.apply_to(source.tower)(x)
        got = moved.apply_to(target.tower)(x)
        naive = tau.apply_to(target.tower)(x)
    assert torch.allclose(got, want, atol=1e-5)
    assert not torch.allclose(naive, want, atol=1e-3)  # plain transport (theta_B + tau_A) is not the same edit


def test_theseus_zeroes_what_it_cannot_map_and_says_so(toy):
    source, target, spec = toy.models["m0"], toy.models["m1"], toy.tasks["t0"]
    tau = TaskVector({"0.weight": torch.ones(16, 24), "2.bias": torch.ones(8), "unknown.weight": torch.ones(3, 3)})
    moved, report = TheseusMaps(source, target, spec.probes).transport(tau)
    assert report["zeroed"] == ["unknown.weight"] and report["zeroed_share"] == pytest.approx(9 / (16 * 24 + 8 + 9))
    assert not moved.deltas["unknown.weight"].any() and moved.deltas["0.weight"].shape == (16, 24)
    with pytest.raises(InvalidInputError, match="calibration"):
        TheseusMaps(source, target, spec.probes[:0])
    assert list(itertools.islice(iter(moved.deltas), 1)) == ["0.weight"]
