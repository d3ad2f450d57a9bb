"""The diagnostics of a setup: participation ratio, linear-probe and best-linear-map ceilings, locality."""

import pytest
import torch

from platonic.experiments.fastpath import FeatureStore
from platonic.experiments.setup import EvalSet
from platonic.experiments.toy import toy_setup
from platonic.experiments.world_diagnostics import best_linear_map, diagnose, linear_probe, participation_ratio
from platonic.metrics import top1


def test_participation_ratio_counts_equally_used_directions():
    g = torch.Generator().manual_seed(0)
    iso = torch.randn(20000, 8, generator=g)  # on the sphere in 8 dims: 8 equal directions, less the norm's
    assert participation_ratio(iso) == pytest.approx(8, rel=0.05)
    line = torch.randn(500, 1, generator=g) * torch.tensor([[1.0, 2.0, 0.0]])  # normalised: +-v, one direction
    assert participation_ratio(line) == pytest.approx(1.0, abs=1e-6)
    squashed = torch.randn(20000, 4, generator=g) * torch.tensor([1.0, 1.0, 0.1, 0.1]) + torch.tensor([0, 0, 0, 5.0])
    assert 1.5 < participation_ratio(squashed) < 2.5


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
