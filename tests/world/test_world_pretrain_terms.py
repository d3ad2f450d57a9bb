"""The pre-training terms that put the world's data sets into different directions (world/train.py)."""

import torch
from torch import nn

from platonic.world.image import build as world_build
from platonic.world.image.train import PRETRAIN_SETS, CaptionSampler, anisotropy, prompt_overlap, set_overlap
from platonic.world.image.zoo import SPECS


def _subspace_rows(n, dims, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = torch.zeros(n, d)
    z[:, dims] = torch.randn(n, len(dims), generator=g)
    return z


def test_set_overlap_is_zero_for_orthogonal_subspaces_and_one_for_alike_sets():
    a, b = _subspace_rows(20, [0, 1]), _subspace_rows(30, [2, 3], seed=1)
    ids = torch.cat([torch.zeros(20, dtype=torch.long), torch.ones(30, dtype=torch.long)])
    assert float(set_overlap(torch.cat([a, b]), ids)) < 1e-7
    same = torch.cat([a, 3.0 * a])  # the second moment of unit rows ignores the scale
    assert abs(float(set_overlap(same, torch.cat([torch.zeros(20), torch.ones(20)]).long())) - 1.0) < 1e-6
    assert float(set_overlap(a, torch.zeros(20, dtype=torch.long))) == 0.0  # one set: nothing to overlap


def test_set_overlap_pulls_the_sets_apart_under_gradient_descent():
    z = torch.randn(40, 8, generator=torch.Generator().manual_seed(3)).requires_grad_()
    ids = torch.arange(40) % 2
    start = float(set_overlap(z, ids))
    opt = torch.optim.SGD([z], lr=0.5)
    for _ in range(200):
        opt.zero_grad()
        set_overlap(z, ids).backward()
        opt.step()
    assert float(set_overlap(z, ids)) < 0.2 * start


def test_prompt_overlap_ignores_a_shift_shared_by_a_sets_captions():
    """Centred Gram matrices: captions of set 0 vary along e0, set 1 along e1, both share a large offset."""
    emb = torch.zeros(8, 4)
    emb[0:4, 0] = torch.tensor([1.0, -1.0, 1.0, -1.0])
    emb[4:8, 1] = torch.tensor([1.0, -1.0, 1.0, -1.0])
    emb[:, 2] = 5.0  # a direction every caption shares: its uncentred Gram overlap would be near 1
    ids = [torch.arange(4).view(2, 2), torch.arange(4, 8).view(2, 2)]
    assert float(prompt_overlap(nn.Identity(), emb, ids)) < 1e-6
    ids_same = [torch.arange(4).view(2, 2), torch.arange(4).view(2, 2)]
    assert abs(float(prompt_overlap(nn.Identity(), emb, ids_same)) - 1.0) < 1e-6


def test_anisotropy_is_d_over_the_participation_ratio():
    g = torch.Generator().manual_seed(4)
    z = torch.randn(400, 8, generator=g)
    u = torch.nn.functional.normalize(z, dim=-1)
    u = (u - u.mean(0)).double()
    lam = torch.linalg.eigvalsh(u.T @ u)
    pr = float(lam.sum() ** 2 / (lam ** 2).sum())
    assert abs(float(anisotropy(z)) - 8 / pr) < 1e-5
    assert float(anisotropy(z)) < 1.2  # near-isotropic Gaussian rows
    line = torch.randn(50, 1, generator=g) * torch.tensor([[1.0, 2.0, 0, 0, 0, 0, 0, 0]])
    assert abs(float(anisotropy(line)) - 8.0) < 1e-4  # unit rows on one line: one direction, d / 1


def test_anisotropy_spreads_the_rows_under_gradient_descent():
    z = (torch.randn(64, 8, generator=torch.Generator().manual_seed(5)) * torch.tensor([4.0, 1, 0.2, 0.2, 0.1, 0.1, 0.1, 0.1]))
    z.requires_grad_()
    start = float(anisotropy(z.detach()))
    opt = torch.optim.SGD([z], lr=0.5)
    for _ in range(200):
        opt.zero_grad()
        anisotropy(z).backward()
        opt.step()
    assert float(anisotropy(z.detach())) < 0.5 * start


def test_sampler_names_the_set_of_every_row(tiny_world):
    data, vocab, _ = world_build.load_world_inputs(tiny_world["path"])
    sampler = CaptionSampler(SPECS["vit-a"], data, vocab, seed=5)
    imgs, caps, set_ids = sampler.sample(48)
    assert len(imgs) == len(caps) == len(set_ids) == 48
    for row in range(48):
        pool = data[PRETRAIN_SETS[int(set_ids[row])]].train.images
        assert (pool == imgs[row]).flatten(1).all(1).any(), f"row {row} is not an image of its named set"
