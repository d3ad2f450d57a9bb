"""Every family folds a random operator exactly through its discovered edit site (CI subset).

The full sweep over open_clip.list_models() is scripts/sweep_edit_sites.py.
"""

import pytest
import torch
from tiny_models import get_model

from platonic.verify import check_fold

CI_SUBSET = {
    "open_clip:ViT-S-32": ("ProjectionParameter", "open_clip VisionTransformer"),
    "open_clip:RN50": ("LinearSite", "ModifiedResNet"),
    "open_clip:convnext_tiny": ("LinearSite", "linear projection head"),
    "open_clip:EVA02-B-16": ("LinearSite", "EVA"),
    "open_clip:ViT-B-16-SigLIP": ("HeadAffineSite", "SigLIP"),
    "open_clip:ViT-B-16-SigLIP2": ("HeadAffineSite", "SigLIP"),
    "hf:tiny-clip": ("LinearSite", "transformers CLIP"),
    "hf:tiny-siglip": ("HeadAffineSite", "transformers SigLIP"),
    "hf:tiny-siglip2": ("HeadAffineSite", "transformers SigLIP"),
    "hf:tiny-clap": ("LinearSite", "CLAP"),
}


@pytest.mark.parametrize("spec", list(CI_SUBSET))
def test_random_operator_folds_exactly_and_unfolds(spec, image_probes, audio_probes):
    model = get_model(spec)
    site_type, family = CI_SUBSET[spec]
    assert type(model.edit_site).__name__ == site_type
    assert family in model.site_rule.family
    probes = audio_probes if model.modality == "audio" else image_probes
    check = check_fold(model, probes, alpha=0.5)
    assert check.rel_error < 1e-4, check
    assert check.rel_error_of_change < 1e-2, check
    assert check.restored_exactly


@pytest.mark.parametrize("spec,expected", [("open_clip:ViT-S-32", ["attn"]), ("hf:tiny-clip", ["q_proj", "v_proj"]),
                                           ("open_clip:EVA02-B-16", ["q_proj", "v_proj"]), ("hf:tiny-clap", ["query", "value"])])
def test_lora_targets_are_attention_query_value(spec, expected):
    assert get_model(spec).lora_target_modules == expected


def test_encode_images_and_audio_by_modality(audio_probes):
    from platonic import InvalidInputError

    clip, clap = get_model("hf:tiny-clip"), get_model("hf:tiny-clap")
    odd_size = torch.randint(0, 256, (2, 3, 50, 70), dtype=torch.uint8)
    assert clip.encode_images(odd_size).shape == (2, clip.embed_dim)
    assert clap.encode_audio(audio_probes).shape == (3, clap.embed_dim)
    with pytest.raises(InvalidInputError, match="image-text model; use encode_images"):
        clip.encode_audio(audio_probes)
    with pytest.raises(InvalidInputError, match="audio-text model; use encode_audio"):
        clap.encode_images(odd_size)
