"""Exports the ecosystem loads: open_clip's hub layout in a directory, transformers' save_pretrained, both with
a model card (huggingface_hub's ModelCard, `base_model:` in its front matter)."""

import json

import open_clip
import pytest
import torch
from tiny_models import clip_tokenizer, get_model, tiny_hf
from huggingface_hub import ModelCard

from platonic import InvalidInputError
from platonic.models import load_model, resolve_spec_paths, spec_files
from platonic.models.card import base_model_id
from platonic.models.open_clip_backend import is_open_clip_export_directory
from platonic.transfer import is_model_export

EDIT = {"edits": [{"route": "closed_form", "alpha": 0.5, "terms": [
    {"coefficient": 1.0, "task": "reds", "source": "open_clip:ViT-S-32", "descriptor_digest": "ab" * 32}]}],
    "recipe": {"name": "test"}}


def image_features(model, pixels):
    """transformers' projected image embeddings (a tensor, or in transformers 5 the output's pooler_output)."""
    out = model.get_image_features(pixel_values=pixels)
    return out if isinstance(out, torch.Tensor) else out.pooler_output


@pytest.mark.parametrize("spec, repo", [
    ("hf:openai/clip-vit-base-patch32", "openai/clip-vit-base-patch32"),
    ("hf:google/siglip-base-patch16-224@0123abc", "google/siglip-base-patch16-224"),
    ("open_clip:ViT-B-32/laion2b_s34b_b79k", "laion/CLIP-ViT-B-32-laion2B-s34B-b79K"),
    ("open_clip:EVA02-B-16/merged2b_s8b_b131k", "timm/eva02_base_patch16_clip_224.merged2b_s8b_b131k"),
    ("open_clip:hf-hub:timm/ViT-B-16-SigLIP", "timm/ViT-B-16-SigLIP"),
    ("open_clip:ViT-B-32", None), ("open_clip:ViT-B-32@weights.pt", None), ("hf:/abs/dir", None),
])
def test_base_model_is_read_from_the_spec_without_network(spec, repo):
    assert base_model_id(spec) == repo


def _edited_open_clip():
    model = get_model("open_clip:ViT-S-32").copy_for_new_weights()
    with torch.no_grad():
        model.module.visual.proj.mul_(1.01)
    return model


def test_an_open_clip_directory_export_loads_in_open_clip_alone(tmp_path):
    model = _edited_open_clip()
    out = model.save(tmp_path / "exp", EDIT)
    assert {p.name for p in out.iterdir()} >= {"open_clip_config.json", "open_clip_model.safetensors", "README.md"}
    assert is_open_clip_export_directory(out) and is_model_export(out)
    loaded, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{out}")
    images = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    tokens = open_clip.get_tokenizer(f"local-dir:{out}")(["a photo of a crimson thing."])
    with torch.no_grad():
        assert torch.allclose(loaded.eval().encode_image(images), model.module.encode_image(images), atol=1e-5)
        assert torch.allclose(loaded.encode_text(tokens), model.module.encode_text(tokens), atol=1e-5)
    card = ModelCard.load(out / "README.md")
    assert card.data.library_name == "open_clip" and "reds" in card.text and "ab" * 32 in card.text
    config = json.loads((out / "open_clip_config.json").read_text())
    assert set(config) == {"model_cfg", "preprocess_cfg"}
    again = load_model(f"open_clip:local-dir:{out}")  # and platonic reads it as a model spec
    assert again.weights_digest() == model.weights_digest()


def test_local_dir_specs_name_their_directory(tmp_path):
    assert spec_files("open_clip:local-dir:exp") == [__import__("pathlib").Path("exp")]
    assert resolve_spec_paths("open_clip:local-dir:exp", tmp_path) == f"open_clip:local-dir:{tmp_path / 'exp'}"
    with pytest.raises(InvalidInputError, match="not an open_clip model directory"):
        load_model(f"open_clip:local-dir:{tmp_path}")


def test_a_weights_suffix_is_not_a_directory_name(tmp_path):
    with pytest.raises(InvalidInputError, match="a file \\*.safetensors or a directory"):
        _edited_open_clip().save(tmp_path / "model.pt", EDIT)


def test_a_transformers_export_carries_the_card_with_base_model(tmp_path):
    from transformers import AutoModel

    model = tiny_hf("clip", tokenizer=clip_tokenizer())
    out = model.save(tmp_path / "hf", {**EDIT, "base_model": "openai/clip-vit-base-patch32"})
    card = ModelCard.load(out / "README.md")
    assert card.data.base_model == "openai/clip-vit-base-patch32" and card.data.library_name == "transformers"
    assert "## Recipe" in card.text
    reloaded = AutoModel.from_pretrained(out).eval()
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(image_features(reloaded, pixels), image_features(model.model, pixels), atol=1e-5)
