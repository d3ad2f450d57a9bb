"""The adapter route (method.md §1.4) on every family: a peft LoRA on the tower, fitted to a descriptor.

One case table over real architectures with random weights. Each case: the untrained adapter is
exactly zero change; a short fit moves the live descriptor towards c U; merging reproduces the fit's
residual when the merged model is measured again; only the tower's LoRA targets change.
"""

import copy

import pytest
import torch
from tiny_models import get_model

from platonic import AdaptConfig, Adapter, Descriptor, InvalidInputError, ProbeGrid, adapt
from platonic.measurement import EmbeddingCache, ProbeStore, measure

PROMPTS = ["a photo of a cat.", "a photo of a dog.", "a photo of a car.", "a photo of a tree."]

FAMILIES = {  # spec -> LoRA targets the backend offers
    "open_clip:ViT-S-32": ["attn"],  # packed nn.MultiheadAttention: peft wraps its in- and out-projection
    "open_clip:RN50": ["conv1", "conv2", "conv3"],  # its attention pool reads q/k/v weights directly: convolutions
    "open_clip:convnext_tiny": ["fc1", "fc2"],  # no attention: the MLP Linears of its blocks
    "open_clip:EVA02-B-16": ["q_proj", "v_proj"],  # timm EVA trunk
    "hf:tiny-clip": ["q_proj", "v_proj"],
    "hf:tiny-siglip": ["q_proj", "v_proj"],
    "hf:tiny-siglip2": ["q_proj", "v_proj"],
    "hf:tiny-clap": ["query", "value"],
}


def grid_for(model, n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    if model.modality == "audio":
        probes = 0.1 * torch.randn(n, 2 * 48000, generator=g)
    else:
        probes = torch.randint(0, 256, (n, 3, 224, 224), dtype=torch.uint8, generator=g)
    canon = model.canonical(probes)
    return canon, ProbeGrid.from_probes("toy", PROMPTS, canon)


def synthetic_descriptor(model, canon, grid, tmp_path, scale=0.2, seed=1):
    """What a perturbation of the tower's weights changed: a descriptor the target can express."""
    ft = model.copy_for_new_weights()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ft.tower.parameters():
            if p.ndim == 2:
                p.add_(scale * p.std() * torch.randn(p.shape, generator=g))
    return measure(model, ft, canon, PROMPTS, "toy", cache=EmbeddingCache(tmp_path / "emb"), progress=False)


def trained_like(model):
    """Random-init ConvNeXt scales every block's branch by a layer scale of 1e-6, so nothing inside a block can
    move the output; trained checkpoints have learned scales. A copy with them at 1 stands in for one."""
    scales = [p for name, p in model.tower.named_parameters() if name.endswith("gamma")]
    if not scales:
        return model
    model = model.copy_for_new_weights()
    with torch.no_grad():
        for name, p in model.tower.named_parameters():
            if name.endswith("gamma"):
                p.fill_(1.0)
    return model


@pytest.mark.parametrize("spec", list(FAMILIES))
def test_adapter_fits_merges_and_measures_back_on_every_family(spec, tmp_path):
    model = trained_like(get_model(spec))
    assert model.lora_target_modules == FAMILIES[spec]
    canon, grid = grid_for(model, n=4)
    desc = synthetic_descriptor(model, canon, grid, tmp_path)
    probes = {grid.probe_digest: canon}
    cache = EmbeddingCache(tmp_path / "emb")

    untrained = adapt(model, desc, config=AdaptConfig(max_steps=0), probes=probes, cache=cache, progress=False)
    assert untrained.report["relative_residual"] == {"toy@" + desc.provenance.source: 1.0}  # exactly zero change
    zero = untrained.merge_into(model.copy_for_new_weights())
    pre, merged = model.module.state_dict(), zero.module.state_dict()
    assert merged.keys() == pre.keys() and all(torch.equal(merged[k], pre[k]) for k in pre)

    fitted = adapt(model, desc, config=AdaptConfig(max_steps=3, batch_size=4), probes=probes, cache=cache, progress=False)
    (residual,) = fitted.report["relative_residual"].values()
    print(f"\n{spec}: relative residual after 3 steps {residual:.3f}")
    assert residual < 1.0
    edited = fitted.merge_into(model.copy_for_new_weights())
    assert edited.edits[-1]["route"] == "adapter" and edited.fingerprint != model.fingerprint
    changed = [k for k, v in edited.module.state_dict().items() if not torch.equal(v, model.module.state_dict()[k])]
    assert changed and all(any(t in k for t in FAMILIES[spec]) for k in changed)
    again = measure(model, edited, canon, PROMPTS, "toy", cache=cache, progress=False)
    measured = float((again.matrix - desc.matrix).norm() / desc.matrix.norm())
    assert measured == pytest.approx(residual, rel=1e-3, abs=1e-4)


def test_adapter_directory_loads_with_peft_alone(tmp_path):
    from peft import PeftModel

    model = get_model("hf:tiny-clip")
    canon, grid = grid_for(model)
    desc = synthetic_descriptor(model, canon, grid, tmp_path)
    adapter = adapt(model, [(1.0, desc)], config=AdaptConfig(max_steps=3, batch_size=4, lr=1e-2),
                    probes={grid.probe_digest: canon}, cache=EmbeddingCache(tmp_path / "c"), progress=False)
    adapter.save(tmp_path / "adapter")
    assert {p.name for p in (tmp_path / "adapter").iterdir()} == {"adapter_config.json", "adapter_model.safetensors"}

    peft_tower = PeftModel.from_pretrained(copy.deepcopy(model.tower), tmp_path / "adapter").merge_and_unload()
    merged = adapter.merge_into(model.copy_for_new_weights())
    ours = merged.tower.state_dict()
    for k, a in peft_tower.state_dict().items():
        assert torch.equal(a, ours[k]), k

    loaded = Adapter.load(tmp_path / "adapter")
    assert loaded.terms == adapter.terms and loaded.terms[0].descriptor_digest
    assert loaded.settings["rank"] == 16 and loaded.target == model.base_fingerprint
    assert loaded.digest() == adapter.digest()
    adapter.save(tmp_path / "adapter")  # a previous adapter directory is replaced
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(Exception, match="exists and is not a previous output"):
        adapter.save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    with pytest.raises(Exception, match="fitted on target"):
        loaded.merge_into(get_model("hf:tiny-siglip"))


def test_same_seed_gives_identical_adapter_tensors(tmp_path):
    model = get_model("hf:tiny-siglip")
    canon, grid = grid_for(model)
    desc = synthetic_descriptor(model, canon, grid, tmp_path)
    runs = [adapt(model, desc, config=AdaptConfig(max_steps=3, batch_size=4, lr=1e-2), probes={grid.probe_digest: canon},
                  cache=EmbeddingCache(tmp_path / f"c{i}"), progress=False) for i in range(2)]
    assert runs[0].weights.keys() == runs[1].weights.keys()
    assert all(torch.equal(runs[0].weights[k], runs[1].weights[k]) for k in runs[0].weights)
    assert runs[0].report["losses"] == runs[1].report["losses"]
    other = adapt(model, desc, config=AdaptConfig(max_steps=3, batch_size=4, lr=1e-2, seed=1),
                  probes={grid.probe_digest: canon}, cache=EmbeddingCache(tmp_path / "c3"), progress=False)
    assert any(not torch.equal(runs[0].weights[k], other.weights[k]) for k in other.weights)


def test_descriptor_whose_probes_cannot_be_found_is_a_clear_error(tmp_path):
    model = get_model("hf:tiny-clip")
    canon, grid = grid_for(model)
    desc = Descriptor(torch.randn(*grid.shape), grid)
    with pytest.raises(InvalidInputError, match="not in the probe store.*pass them explicitly"):
        adapt(model, desc, config=AdaptConfig(max_steps=1), store=ProbeStore(tmp_path / "empty"), progress=False)


def test_two_terms_on_a_transformers_model_are_fitted_jointly(tmp_path):
    """Transformers inputs are dicts: each term runs its own forward; both terms' residuals fall."""
    model = get_model("hf:tiny-clip")
    descs, probes = [], {}
    for seed in (0, 1):
        canon, grid = grid_for(model, n=4, seed=seed)
        descs.append(synthetic_descriptor(model, canon, grid, tmp_path, seed=seed + 1))
        probes[grid.probe_digest] = canon
    adapter = adapt(model, [(1.0, descs[0]), (-1.0, descs[1])], config=AdaptConfig(max_steps=4, batch_size=8, lr=1e-3), probes=probes,
                    cache=EmbeddingCache(tmp_path / "emb"), progress=False)
    assert [t.coefficient for t in adapter.terms] == [1.0, -1.0]
    residuals = adapter.report["relative_residual"]
    assert len(residuals) == 2 and all(r < 1.0 for r in residuals.values()), residuals
