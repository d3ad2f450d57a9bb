"""Measure on real architectures, hit the cache, and move an edit across families end to end."""

import copy
import json
import logging
import warnings

import pytest
import torch
from tiny_models import get_model
from safetensors import safe_open
from safetensors.torch import save_file

from platonic import Descriptor, InvalidInputError, OperatorBank, ProbeGrid, RidgeSolver, digest_probes
from platonic.measurement import EmbeddingCache, canonical_probes, design_rows, measure, target_grid
from platonic.transfer import apply, save_model, solve_bank

PROMPTS = ["a photo of a cat.", "a photo of a dog.", "a photo of a bird.", "a photo of a car."]


def probes_n(n=8, seed=1):
    return torch.randint(0, 256, (n, 3, 224, 224), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def perturbed_state(model, scale=0.05, seed=0, prefix="visual."):
    """A partial state dict: the image tower's 2-D weights with a small random change (a "fine-tune")."""
    g = torch.Generator().manual_seed(seed)
    return {k: (v + scale * v.std() * torch.randn(v.shape, generator=g)).contiguous()
            for k, v in model.module.state_dict().items() if k.startswith(prefix) and v.ndim == 2}


def count_forward(model, monkeypatch):
    calls = {"n": 0}
    original = type(model)._forward_tower

    def counting(self, inputs):
        calls["n"] += 1
        return original(self, inputs)

    monkeypatch.setattr(type(model), "_forward_tower", counting)
    return calls


def test_measuring_twice_hits_the_cache(tmp_path, monkeypatch):
    pre = get_model("open_clip:ViT-S-32")
    ft_file = tmp_path / "ft.safetensors"
    save_file(perturbed_state(pre), str(ft_file))
    calls = count_forward(pre, monkeypatch)
    cache = EmbeddingCache(tmp_path / "emb")
    d1 = measure(pre, ft_file, probes_n(), PROMPTS, "toy", cache=cache)
    first = calls["n"]
    assert first > 0
    d2 = measure(pre, ft_file, probes_n(), PROMPTS, "toy", cache=cache)
    assert calls["n"] == first, "the second measurement ran a forward pass"
    assert torch.equal(d1.matrix, d2.matrix) and d1.grid == d2.grid
    assert d1.norm() > 0


def test_a_fine_tune_of_the_tower_reuses_its_bases_text_embeddings_and_a_new_text_tower_does_not(tmp_path, monkeypatch):
    pre = get_model("open_clip:ViT-S-32")
    cache = EmbeddingCache(tmp_path)
    g = cache.texts(pre, PROMPTS)
    encoded = []
    original = type(pre).encode_texts
    monkeypatch.setattr(type(pre), "encode_texts", lambda self, texts: encoded.append(self) or original(self, texts))

    tuned = pre.copy_for_new_weights()
    tuned.module.load_state_dict(perturbed_state(pre), strict=False)
    assert tuned.fingerprint != pre.fingerprint and tuned.text_fingerprint == pre.text_fingerprint
    assert torch.equal(cache.texts(tuned, PROMPTS), g) and encoded == []

    retexted = pre.copy_for_new_weights()
    retexted.module.load_state_dict(perturbed_state(pre, prefix="transformer."), strict=False)
    assert retexted.text_fingerprint != pre.text_fingerprint
    again = cache.texts(retexted, PROMPTS)
    assert encoded == [retexted] and not torch.allclose(again, g)
    assert torch.equal(cache.texts(retexted, PROMPTS), again) and encoded == [retexted]


def test_a_model_minus_itself_is_a_zero_descriptor(tmp_path):
    pre = get_model("hf:tiny-siglip")
    d = measure(pre, pre, probes_n(4), PROMPTS, "toy", cache=EmbeddingCache(tmp_path))
    assert d.norm() == 0


def test_lora_adapter_directory_equals_its_merged_model(tmp_path):
    from peft import LoraConfig, get_peft_model

    pre = get_model("hf:tiny-clip")
    tower = copy.deepcopy(pre.tower)
    peft_model = get_peft_model(tower, LoraConfig(r=4, lora_alpha=8, target_modules=pre.lora_target_modules, init_lora_weights=False))
    peft_model.save_pretrained(tmp_path / "adapter")
    merged = copy.deepcopy(pre)
    merged.invalidate_fingerprint()
    merged.model.vision_model = peft_model.merge_and_unload()
    via_dir = measure(pre, tmp_path / "adapter", probes_n(4), PROMPTS, "toy", cache=EmbeddingCache(tmp_path / "c"))
    via_model = measure(pre, merged, probes_n(4), PROMPTS, "toy", cache=EmbeddingCache(tmp_path / "c2"))
    assert via_dir.norm() > 0
    assert torch.allclose(via_dir.matrix, via_model.matrix, atol=1e-6)


def test_bad_finetunes_are_clear_errors(tmp_path):
    pre = get_model("open_clip:ViT-S-32")
    save_file({"no.such.weight": torch.zeros(2)}, str(tmp_path / "alien.safetensors"))
    with pytest.raises(InvalidInputError, match="do not exist in open_clip:ViT-S-32"):
        measure(pre, tmp_path / "alien.safetensors", probes_n(2), PROMPTS, "toy")
    save_file({"visual.proj": torch.zeros(3, 3)}, str(tmp_path / "shape.safetensors"))
    with pytest.raises(InvalidInputError, match="visual.proj has shape"):
        measure(pre, tmp_path / "shape.safetensors", probes_n(2), PROMPTS, "toy")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InvalidInputError, match="cannot read the fine-tune"):
        measure(pre, tmp_path / "notes.txt", probes_n(2), PROMPTS, "toy")


@pytest.mark.parametrize("target_spec", ["open_clip:RN50", "hf:tiny-siglip"])
def test_cross_family_edit_exports_and_reloads_with_upstream_alone(tmp_path, target_spec, capsys):
    """ViT source descriptor -> solved into another family -> folded -> exported -> reloaded by upstream."""
    source = get_model("open_clip:ViT-S-32")
    save_file(perturbed_state(source, scale=0.2), str(tmp_path / "ft.safetensors"))
    probes = probes_n(16)
    cache = EmbeddingCache(tmp_path / "emb")
    desc = measure(source, tmp_path / "ft.safetensors", probes, PROMPTS, "toy", cache=cache)
    desc.save(tmp_path / "toy.utd")

    target = copy.deepcopy(get_model(target_spec))
    bank = solve_bank(target, [Descriptor.load(tmp_path / "toy.utd")], probes={desc.grid.probe_digest: probes}, cache=cache)
    pristine = copy.deepcopy(target)
    apply(target, bank, {"toy": 1.0}, alpha=0.5)
    edited = target.encode_probes(probes).z

    if target_spec.startswith("open_clip:"):
        import open_clip

        path = save_model(target, tmp_path / "edited.safetensors")
        with safe_open(str(path), framework="pt") as f:
            record = json.loads(f.metadata()["platonic"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)
            reloaded = open_clip.create_model("RN50", pretrained=str(path)).eval()
            logging.disable(logging.NOTSET)
        with torch.inference_mode():
            z = reloaded.encode_image(target.prepare_probes(probes), normalize=False)
    else:
        from transformers import AutoModel

        path = save_model(target, tmp_path / "edited")
        record = json.loads((path / "platonic_provenance.json").read_text())
        reloaded = AutoModel.from_pretrained(path).eval()
        with torch.inference_mode():
            z = reloaded.vision_model(**target.prepare_probes(probes)).pooler_output
    assert float((z - edited).norm() / edited.norm()) < 1e-6
    edit = record["edits"][0]
    assert edit["alpha"] == 0.5 and edit["terms"][0]["task"] == "toy"
    assert edit["terms"][0]["descriptor_digest"] == bank.entries[("open_clip:ViT-S-32", "toy")].terms[0].descriptor_digest

    remeasured = measure(pristine, target, probes, PROMPTS, "toy", cache=EmbeddingCache(tmp_path / "re"))
    residual = float((remeasured.matrix - 0.5 * desc.matrix).norm() / (0.5 * desc.matrix).norm())
    print(f"{target_spec}: re-measured target descriptor vs 0.5 x source descriptor: relative residual {residual:.3f}, "
          f"solve residual {bank.entries[('open_clip:ViT-S-32', 'toy')].residual:.3f}")
    assert remeasured.norm() > 0


def test_bank_refuses_another_target(tmp_path):
    from platonic import FingerprintMismatchError

    source = get_model("open_clip:ViT-S-32")
    probes = probes_n(4)
    desc = measure(source, source, probes, PROMPTS, "toy", cache=EmbeddingCache(tmp_path))
    desc = Descriptor(torch.randn(desc.shape) * 0.01, desc.grid, desc.provenance)
    bank = solve_bank(get_model("hf:tiny-clip"), [desc], probes={desc.grid.probe_digest: probes}, cache=EmbeddingCache(tmp_path))
    with pytest.raises(FingerprintMismatchError, match="solved for target"):
        apply(get_model("hf:tiny-siglip"), bank, {"toy": 1.0})


@pytest.mark.parametrize("mode", ["lora", "attention"])
def test_lora_and_attention_finetunes_on_a_real_architecture(mode):
    from platonic.finetuning.training import FinetuneConfig, finetune

    model = get_model("hf:tiny-clip")
    x = probes_n(8)
    y = torch.arange(4).repeat(2)
    ft, losses = finetune(model, x, y, PROMPTS, FinetuneConfig(mode=mode, steps=3, batch_size=4, lr=1e-2, orthoreg=0.5),
                          progress=False)
    assert len(losses) == 3
    changed = [k for k, v in ft.module.state_dict().items() if not torch.equal(v, model.module.state_dict()[k])]
    assert changed and all("vision_model" in k for k in changed)
    assert all("lora" not in k for k in ft.module.state_dict())  # LoRA merged away: a plain model again
    if mode == "lora":
        assert {k.rsplit(".", 2)[-2] for k in changed} <= {"q_proj", "v_proj"}


@pytest.mark.parametrize("target_spec", ["hf:tiny-clip", "hf:tiny-siglip"])
def test_anchored_solve_bank_records_its_pool_and_solves_with_the_pools_design_rows(tmp_path, target_spec):
    """The pool goes through the target's own design-row map (z / ||z||, or [u; 1] / ||z|| for a head edit);
    each operator records the solve kind, the weight and the pool's digest, and keeps them through a save."""
    probes, pool = probes_n(6, seed=1), probes_n(5, seed=2)
    target = get_model(target_spec)
    grid = ProbeGrid.from_probes("toy", PROMPTS, probes)
    desc = Descriptor(0.01 * torch.randn(grid.shape, generator=torch.Generator().manual_seed(3)), grid)
    cache = EmbeddingCache(tmp_path / "emb")
    bank = solve_bank(target, [desc], probes={grid.probe_digest: probes}, cache=cache, solve="anchored",
                      anchor_images=pool, anchor_weight=0.5, progress=False)
    (op,) = list(bank)
    record = op.solve_record
    assert record["kind"] == "anchored" and record["anchor_weight"] == 0.5 and record["n_anchor"] == 5
    assert record["anchor_digest"] == digest_probes(canonical_probes(target, pool))
    F, G = target_grid(target, probes, PROMPTS, cache=cache, progress=False)
    F_pool = design_rows(target, pool, cache=cache, progress=False)
    assert F_pool.shape == (5, F.shape[1])  # (p + 1) columns for the head form
    X = RidgeSolver(F, G, anchor=F_pool, anchor_weight=0.5).solve(desc.matrix)
    assert torch.equal(op.delta, (X.T if op.form == "linear" else X).contiguous())
    bank.save(tmp_path / "a.bank")
    assert list(OperatorBank.load(tmp_path / "a.bank"))[0].solve_record == record
    paper = list(solve_bank(target, [desc], probes={grid.probe_digest: probes}, cache=cache, progress=False))[0]
    assert paper.solve_record["kind"] == "paper" and paper.solve_record["anchor_digest"] is None
    assert not torch.equal(paper.delta, op.delta)
