"""Existing checkpoints as fine-tune sources (issue 14, item 2): vision-only transformers fine-tunes, open_clip
state dicts in safetensors and weights-only .pt, peft adapters, pinning, pickled checkpoints refused and converted.

Every model is tiny with random weights (hidden 32, 2 layers, image 32); nothing touches the network.
"""

import copy
import json

import pytest
import torch
from tiny_models import get_model
from safetensors.torch import save_file
from typer.testing import CliRunner

from platonic.cli import app
from platonic.errors import InvalidInputError, PickledCheckpointError, UnpinnedRevisionError
from platonic.finetuning.sources import load_finetuned, require_pinned
from platonic.measurement import EmbeddingCache, measure

PROMPTS = ["a photo of a cat.", "a photo of a dog.", "a photo of a bird."]
TINY_OPEN_CLIP = "platonic-tiny-vit"
TINY_OPEN_CLIP_CONFIG = {"embed_dim": 16,
                         "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "head_width": 16, "patch_size": 8},
                         "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}}


def probes(n=4, seed=1):
    return torch.randint(0, 256, (n, 3, 224, 224), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def run(*args):
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def perturb(model, keys, scale=0.2, seed=0):
    """A copy of `model` whose 2-D tensors among `keys` got a small random change (a "fine-tune")."""
    ft = model.copy_for_new_weights()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for k, v in ft.module.state_dict(keep_vars=True).items():
            if k in keys and v.ndim == 2:
                v.add_(scale * v.std() * torch.randn(v.shape, generator=g))
    return ft


def descriptor(pre, finetuned, tmp_path, name):
    return measure(pre, finetuned, probes(), PROMPTS, "toy", cache=EmbeddingCache(tmp_path / "caches" / name), progress=False)


@pytest.fixture(scope="module")
def tiny_open_clip(tmp_path_factory):
    import open_clip

    folder = tmp_path_factory.mktemp("open_clip_config")
    (folder / f"{TINY_OPEN_CLIP}.json").write_text(json.dumps(TINY_OPEN_CLIP_CONFIG))
    open_clip.add_model_config(folder)
    return get_model(f"open_clip:{TINY_OPEN_CLIP}")


# -- transformers vision-only fine-tunes ---------------------------------------------------------------

def vision_only(ft):
    """The image side of a tiny CLIPModel as a CLIPVisionModelWithProjection (what hub vision fine-tunes are)."""
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    config = CLIPVisionConfig(**{**ft.model.config.vision_config.to_dict(), "projection_dim": ft.model.config.projection_dim})
    vision = CLIPVisionModelWithProjection(config).eval()
    own = ft.model.state_dict()
    vision.load_state_dict({k: own[k] for k in vision.state_dict()})  # strict: every key is the CLIPModel's own
    return vision


def test_a_vision_only_clip_finetune_measures_as_the_perturbed_full_model(tmp_path):
    pre = get_model("hf:tiny-clip")
    ft = perturb(pre, {k for k in pre.module.state_dict() if k.startswith(("vision_model.", "visual_projection."))})
    vision = vision_only(ft)
    vision.save_pretrained(tmp_path / "vision-ft")
    save_file({k: v.contiguous() for k, v in vision.state_dict().items()}, str(tmp_path / "vision-ft.safetensors"))

    expected = descriptor(pre, ft, tmp_path, "full")
    assert expected.norm() > 0
    for source in (tmp_path / "vision-ft", f"hf:{tmp_path / 'vision-ft'}", tmp_path / "vision-ft.safetensors"):
        got = descriptor(pre, str(source), tmp_path, str(source).replace("/", "_"))
        assert torch.allclose(got.matrix, expected.matrix, atol=1e-6), source
    n = sum(1 for _ in vision.state_dict())
    assert "CLIPVisionModelWithProjection" in got.provenance.finetune or "state dict" in got.provenance.finetune
    via_dir = descriptor(pre, str(tmp_path / "vision-ft"), tmp_path, "dir")
    assert f"transformers CLIPVisionModelWithProjection; {n} of the model's" in via_dir.provenance.finetune
    assert "image side (vision_model., visual_projection.)" in via_dir.provenance.finetune


def test_a_vision_tower_without_projection_loads_onto_the_tower_alone(tmp_path):
    from transformers import CLIPVisionModel

    pre = get_model("hf:tiny-clip")
    ft = perturb(pre, {k for k in pre.module.state_dict() if k.startswith("vision_model.")})
    vision = CLIPVisionModel(ft.model.config.vision_config).eval()
    own = ft.model.state_dict()
    # transformers 5 keeps CLIPVisionModel's modules at its top level (4.x: under vision_model.); either way
    # its keys are the tower's own
    vision.load_state_dict({k: own[k if k.startswith("vision_model.") else f"vision_model.{k}"] for k in vision.state_dict()})
    vision.save_pretrained(tmp_path / "tower")
    got = descriptor(pre, str(tmp_path / "tower"), tmp_path, "tower")
    assert torch.allclose(got.matrix, descriptor(pre, ft, tmp_path, "full").matrix, atol=1e-6)


# -- open_clip checkpoints -----------------------------------------------------------------------------

def test_open_clip_state_dicts_in_safetensors_and_weights_only_pt(tmp_path, tiny_open_clip):
    pre = tiny_open_clip
    ft = perturb(pre, {k for k in pre.module.state_dict() if k.startswith("visual.")})
    expected = descriptor(pre, ft, tmp_path, "model")
    assert expected.norm() > 0
    full = {k: v.detach().clone().contiguous() for k, v in ft.module.state_dict().items()}
    save_file(full, str(tmp_path / "ft.safetensors"))
    # a training checkpoint as open_clip writes it: DDP's "module." prefix inside "state_dict", beside counters
    torch.save({"epoch": 3, "name": "run", "state_dict": {f"module.{k}": v for k, v in full.items()}}, tmp_path / "ft.pt")
    torch.save({k.removeprefix("visual."): v for k, v in full.items() if k.startswith("visual.")}, tmp_path / "tower.bin")
    for source, loaded in (("ft.safetensors", "all"), ("ft.pt", "all"), ("tower.bin", "image side")):
        got = descriptor(pre, str(tmp_path / source), tmp_path, source)
        assert torch.allclose(got.matrix, expected.matrix, atol=1e-6), source
        assert loaded in got.provenance.finetune, got.provenance.finetune


def test_keys_that_match_nothing_say_how_many_matched(tmp_path, tiny_open_clip):
    save_file({"encoder.w": torch.zeros(2), "encoder.b": torch.zeros(3)}, str(tmp_path / "alien.safetensors"))
    with pytest.raises(InvalidInputError, match=r"0 of 2 keys match a tensor of .*expected keys that start with visual\."):
        load_finetuned(tiny_open_clip, tmp_path / "alien.safetensors")
    own = tiny_open_clip.module.state_dict()
    some = {"visual.proj": own["visual.proj"].clone(), "nothing.here": torch.zeros(1)}
    save_file(some, str(tmp_path / "some.safetensors"))
    with pytest.raises(InvalidInputError, match="1 of 2 keys match"):
        load_finetuned(tiny_open_clip, tmp_path / "some.safetensors")
    text = {"visual.proj": own["visual.proj"].clone(), "text_projection": own["text_projection"].clone()}
    save_file(text, str(tmp_path / "text.safetensors"))
    with pytest.raises(InvalidInputError, match="must hold image-side tensors only"):
        load_finetuned(tiny_open_clip, tmp_path / "text.safetensors")


# -- peft adapters -------------------------------------------------------------------------------------

def test_a_peft_adapter_directory_is_merged_and_named_in_provenance(tmp_path):
    from peft import LoraConfig, get_peft_model

    pre = get_model("hf:tiny-clip")
    peft_model = get_peft_model(copy.deepcopy(pre.tower), LoraConfig(r=2, lora_alpha=4, target_modules=pre.lora_target_modules,
                                                                     init_lora_weights=False))
    peft_model.save_pretrained(tmp_path / "adapter")
    merged = pre.copy_for_new_weights()
    merged.model.vision_model = peft_model.merge_and_unload()
    got = descriptor(pre, str(tmp_path / "adapter"), tmp_path, "adapter")
    assert got.norm() > 0
    assert torch.allclose(got.matrix, descriptor(pre, merged, tmp_path, "merged").matrix, atol=1e-6)
    assert "peft LORA adapter, rank 2" in got.provenance.finetune


# -- pickled checkpoints --------------------------------------------------------------------------------

def test_a_pickled_module_is_refused_then_converted_only_with_the_flag(tmp_path, tiny_open_clip):
    pre = tiny_open_clip
    ft = perturb(pre, {k for k in pre.module.state_dict() if k.startswith("visual.")})
    torch.save(ft.model.visual, tmp_path / "tower.pt")  # a whole pickled module, as some task-vector releases ship
    with pytest.raises(PickledCheckpointError, match=r"platonic convert --trust-pickle .*tower.pt -o .*tower.safetensors"):
        load_finetuned(pre, tmp_path / "tower.pt")
    out = tmp_path / "tower.safetensors"
    code, text = run("convert", tmp_path / "tower.pt", "-o", out)
    assert code == 2 and "--trust-pickle" in text and len(text.strip().splitlines()) == 1, text
    assert not out.exists()
    code, text = run("convert", "--trust-pickle", tmp_path / "tower.pt", "-o", out)
    assert code == 0, text
    assert "warning: unpickling" in text and "runs the code" in text
    got = descriptor(pre, str(out), tmp_path, "converted")
    assert torch.allclose(got.matrix, descriptor(pre, ft, tmp_path, "model").matrix, atol=1e-6)
    code, text = run("convert", "--trust-pickle", tmp_path / "tower.pt", "-o", out)  # a previous conversion: replaced
    assert code == 0, text


# -- pinning -----------------------------------------------------------------------------------------------

def test_require_pinned_refuses_unpinned_hub_revisions(tmp_path, tiny_open_clip):
    commit = "0123456789abcdef0123456789abcdef01234567"
    require_pinned(f"hf:org/vision-ft@{commit}")
    require_pinned(str(tmp_path))  # local sources need no pin
    for source, says in (("hf:org/vision-ft", "names no revision"), ("hf:org/vision-ft@main", "branch or tag"),
                         ("open_clip:hf-hub:org/ft", "cannot be pinned")):
        with pytest.raises(UnpinnedRevisionError, match=says):
            require_pinned(source)
    (tmp_path / "p.txt").write_text("a\nb\n")
    code, text = run("measure", "--model", f"open_clip:{TINY_OPEN_CLIP}", "--finetuned", "hf:org/vision-ft@main",
                     "--require-pinned", "--task", "toy", "--probes", tmp_path, "--prompts", tmp_path / "p.txt",
                     "-o", tmp_path / "x.utd")
    assert code == 2 and "hf:org/vision-ft@COMMIT" in text and len(text.strip().splitlines()) == 1, text


def test_a_yaml_setup_with_require_pinned_refuses_before_loading(tmp_path):
    from platonic.experiments.setups import check_files, config_from_options

    config = config_from_options(["a=open_clip:ViT-S-32", "b=open_clip:RN50"], [f"toy={tmp_path}"], [],
                                 ["a/toy=hf:org/a-ft", "b/toy=hf:org/b-ft@" + "f" * 40])
    config = config.model_copy(update={"require_pinned": True})
    with pytest.raises(UnpinnedRevisionError, match=r"source a/toy hf:org/a-ft is not pinned.*require_pinned: true"):
        check_files(config)
