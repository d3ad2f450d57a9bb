"""The zoo behind platonic's DualEncoder interface: heterogeneity, loading, exact folds through every edit site."""

import pytest
import torch

from platonic import HeadAffineSite, Operator, fold, unfold
from platonic.bank import Term
from platonic.models import DualEncoder, load_model
from platonic.world.image.zoo import MODEL_NAMES, SPECS

ALPHA = 0.5


def rel(a, b):
    return float((a - b).norm() / b.norm())


def test_zoo_is_heterogeneous():
    specs = list(SPECS.values())
    assert len(specs) >= 6
    assert len({s.arch for s in specs}) >= 3
    assert len({s.embed_dim for s in specs}) >= 3
    assert len({s.text for s in specs}) >= 2
    assert {s.loss for s in specs} == {"clip", "siglip"}
    assert "head" in {s.site for s in specs}
    same = [(a, b) for a in specs for b in specs if a.name < b.name and a.architecture() == b.architecture()]
    assert any(a.seed != b.seed and (a.mixture != b.mixture or a.name_rate != b.name_rate) for a, b in same)


@pytest.fixture(scope="module")
def models(tiny_world):
    return {name: load_model(f"world:{name}") for name in MODEL_NAMES}


def test_load_model_gives_dual_encoders(models, tiny_world):
    from platonic.world.image.data import TASKS

    probes = torch.randint(0, 256, (5, 3, 32, 32), dtype=torch.uint8)
    for name, m in models.items():
        assert isinstance(m, DualEncoder) and m.spec == f"world:{name}"
        emb = m.encode_probes(probes)
        assert emb.z.shape == (5, m.embed_dim)
        assert (emb.u is not None) == isinstance(m.edit_site, HeadAffineSite)
        assert m.encode_texts(TASKS["fashion"].prompts).shape == (10, m.embed_dim)
        assert m.lora_target_modules and m.logit_scale > 0
    assert models["vit-a"].architecture_id() == models["vit-b"].architecture_id()
    assert models["vit-a"].fingerprint != models["vit-b"].fingerprint


def test_finetuned_sources_load_and_differ(tiny_world):
    base = load_model("world:vit-a")
    full = load_model("world:vit-a/fashion")
    lora = load_model("world:vit-a/fashion/lora")
    assert len({base.fingerprint, full.fingerprint, lora.fingerprint}) == 3
    # a LoRA source changes only its target modules
    b, l = base.module.state_dict(), lora.module.state_dict()
    changed = {k for k in b if not torch.equal(b[k], l[k])}
    assert changed and all(any(t in k for t in base.lora_target_modules) for k in changed)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_zoo_model_folds_exactly(models, name):
    m = models[name]
    site = m.edit_site
    probes = torch.randint(0, 256, (16, 3, 32, 32), dtype=torch.uint8)
    before = m.encode_probes(probes)
    g = torch.Generator().manual_seed(1)
    if isinstance(site, HeadAffineSite):
        B = 0.05 * torch.randn(site.in_dim + 1, site.out_dim, generator=g)
        op = Operator(delta=B, form="head_affine", target=m.fingerprint, terms=(Term(1.0, "s", "t"),))
        predicted = before.z + ALPHA * torch.cat([before.u, torch.ones(len(before.u), 1)], 1) @ B
    else:
        A = 0.3 * torch.randn(m.embed_dim, m.embed_dim, generator=g)
        op = Operator(delta=A, form="linear", target=m.fingerprint, terms=(Term(1.0, "s", "t"),))
        predicted = before.z @ (torch.eye(m.embed_dim) + ALPHA * A).T
    n_params = sum(p.numel() for p in m.module.parameters())
    record = fold(site, op, ALPHA)
    after = m.encode_probes(probes).z
    assert rel(after, predicted) < 1e-4
    assert sum(p.numel() for p in m.module.parameters()) == n_params
    unfold(record)
    assert torch.equal(m.encode_probes(probes).z, before.z)


def test_unknown_world_model_is_refused(tiny_world):
    from platonic.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="vit-a"):
        load_model("world:nope")
    with pytest.raises(InvalidInputError, match="task"):
        load_model("world:vit-a/notatask")
