"""The diagnostics of a setup: participation ratio, linear-probe and best-linear-map ceilings, locality."""

import pytest
import torch

from platonic.experiments.engine.fastpath import FeatureStore
from platonic.experiments.engine.setup import EvalSet
from platonic.experiments.setups.toy import toy_setup
from platonic.experiments.checks.diagnose import best_linear_map, diagnose, linear_probe, participation_ratio, prompt_leak
from platonic.metrics import top1
from platonic.solve import solve


def test_participation_ratio_counts_equally_used_directions():
    g = torch.Generator().manual_seed(0)
    iso = torch.randn(20000, 8, generator=g)  # on the sphere in 8 dims: 8 equal directions, less the norm's
    assert participation_ratio(iso) == pytest.approx(8, rel=0.05)
    line = torch.randn(500, 1, generator=g) * torch.tensor([[1.0, 2.0, 0.0]])  # normalised: +-v, one direction
    assert participation_ratio(line) == pytest.approx(1.0, abs=1e-6)
    squashed = torch.randn(20000, 4, generator=g) * torch.tensor([1.0, 1.0, 0.1, 0.1]) + torch.tensor([0, 0, 0, 5.0])
    assert 1.5 < participation_ratio(squashed) < 2.5


def test_prompt_leak_is_what_the_operator_can_reach_of_another_tasks_classes():
    g = torch.Generator().manual_seed(2)
    d = 12
    own = torch.randn(4, d, generator=g) * (torch.arange(d) < 4)  # task t's prompts span coordinates 0-3
    common = torch.zeros(d); common[0] = 3.0  # a shift shared by every prompt of s moves no prediction
    apart = torch.nn.functional.normalize(torch.randn(5, d, generator=g) * (torch.arange(d) >= 6), dim=1) + common
    # (equal norms, so the shared coordinate stays shared once the prompts are normalised)
    inside = torch.randn(5, d, generator=g) * (torch.arange(d) < 4)
    assert prompt_leak(own, [apart]) == pytest.approx(0.0, abs=1e-6)
    assert prompt_leak(own, [inside]) == pytest.approx(1.0, abs=1e-9)
    assert prompt_leak(own, [apart, inside]) == pytest.approx(0.5, abs=1e-6)
    assert prompt_leak(own, []) == 0.0
    # the reason: the closed-form operator A = X^T maps every embedding into span(G_t), so with zero leak
    # it leaves the other task's class scores' differences, hence its predictions, exactly unchanged
    F = torch.nn.functional.normalize(torch.randn(40, d, generator=g), dim=1)
    U = torch.randn(40, 4, generator=g)
    A = solve(F.double(), torch.nn.functional.normalize(own, dim=1).double(), U.double()).T
    z = torch.nn.functional.normalize(torch.randn(30, d, generator=g), dim=1).double()
    Gs = torch.nn.functional.normalize(apart, dim=1).double()
    before, after = z @ Gs.T, (z + z @ A.T) @ Gs.T
    change = after - before
    assert change.abs().max() > 1e-3  # it does move the other task's scores, all classes alike
    assert (change - change.mean(dim=1, keepdim=True)).abs().max() < 1e-6 * change.abs().max()  # float64 solve round-off


def test_linear_probe_and_best_linear_map_reach_what_a_linear_read_out_can():
    g = torch.Generator().manual_seed(1)
    centres = torch.eye(4)[:3] * 3  # three classes, separable; the prompts point elsewhere
    y = torch.randint(0, 3, (600,), generator=g)
    z = centres[y] + 0.3 * torch.randn(600, 4, generator=g)
    yt = torch.randint(0, 3, (300,), generator=g)
    zt = centres[yt] + 0.3 * torch.randn(300, 4, generator=g)
    prompts = torch.roll(centres, 1, dims=0) + torch.tensor([0, 0, 0, 1.0])  # zero-shot is wrong by construction
    assert top1(zt, prompts, yt) < 0.2
    assert linear_probe(z, y, zt, yt, 3) > 0.97
    assert best_linear_map(z, y, zt, yt, prompts, scale=20.0) > 0.95  # a map onto the prompts exists


def test_diagnose_reports_every_cell_with_locality_and_effective_rank():
    setup = toy_setup()
    store = FeatureStore(setup)
    train = {t: EvalSet(f"{t}/train", spec.test.inputs + 0.05, spec.test.labels, spec.prompts) for t, spec in setup.tasks.items()}
    own = {(m, t): setup.descriptors[(m, t)] for m in setup.models for t in setup.tasks}
    out = diagnose(store, train, own)
    assert set(out) == set(setup.models)
    for m, r in out.items():
        assert set(r["tasks"]) == set(setup.tasks) and 1 <= r["participation_ratio"] <= setup.models[m].embed_dim
        for t, cell in r["tasks"].items():
            assert 0 <= cell["linear_probe"] <= 1 and 0 <= cell["best_linear_map"] <= 1
            assert cell["own_gain"] == pytest.approx(cell["oracle_alpha1"] - cell["zero_shot"])
            assert cell["motion_ratio"] > 0 and 0 <= cell["residual"] <= 1
