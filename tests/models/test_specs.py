"""Model specs: accepted forms, clear errors, random-weight warning, the appended-linear fallback."""

import pytest
from torch import nn

from platonic import EditSiteError, InvalidInputError
from platonic.models import load_model
from platonic.models.sites import OPEN_CLIP_RULES, discover_site
from platonic.verify import check_fold


@pytest.mark.parametrize("spec,match", [
    ("nonsense", "accepted forms: open_clip:ARCH/TAG"),
    ("open_clip:", "names no model"),
    ("", "non-empty"),
    ("open_clip:ViT-B-33", "did you mean ViT-B-32"),
    ("open_clip:ViT-B-32/no-such-tag", "no pretrained tag 'no-such-tag' for ViT-B-32; known tags: openai"),
    ("open_clip:ViT-B-32@/nonexistent/weights.safetensors", "does not exist"),
])
def test_bad_specs_name_the_problem(spec, match):
    with pytest.raises(InvalidInputError, match=match):
        load_model(spec)


def test_random_weights_warn():
    with pytest.warns(UserWarning, match="RANDOM weights"):
        load_model("open_clip:ViT-S-32")


def test_unknown_architecture_names_what_was_found_and_offers_append():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = nn.Sequential(nn.Linear(4, 8), nn.GELU())
            self.text = nn.Sequential(nn.Embedding(10, 8), nn.LayerNorm(8))  # after the image tower, as in open_clip

    with pytest.raises(EditSiteError, match=r"ends in .*visual\.1 \(GELU\)\. .*edit_site='append'") as raised:
        discover_site(Odd(), OPEN_CLIP_RULES)
    assert "text" not in str(raised.value)  # the image tower's tail, not the text tower's


def test_appended_linear_site_on_a_real_model_is_exact(image_probes):
    with pytest.warns(UserWarning, match="RANDOM"):
        model = load_model("open_clip:ViT-S-32", edit_site="append")
    assert type(model.edit_site).__name__ == "AppendedLinearSite"
    check = check_fold(model, image_probes)
    assert check.ok(), check


def test_a_directory_that_is_not_a_model_is_a_clear_error(tmp_path):
    with pytest.raises(InvalidInputError, match="cannot load"):
        load_model(str(tmp_path))
