"""Random-weight open_clip specs are seeded, so one spec is one model; a weights file of another
architecture is a clear error (issue 12)."""

import warnings

import pytest
import torch
from tiny_models import get_model
from safetensors.torch import save_file

from platonic import InvalidInputError
from platonic.models import load_model


def test_the_same_random_spec_is_the_same_model():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(123)
        expected_next = torch.rand(3)
        torch.manual_seed(123)
        a = load_model("open_clip:ViT-S-32")
        assert torch.equal(torch.rand(3), expected_next)  # the global random state is left alone
        b = load_model("open_clip:ViT-S-32@seed=0")
        c = load_model("open_clip:ViT-S-32@seed=1")
    assert a.fingerprint == b.fingerprint == get_model("open_clip:ViT-S-32").fingerprint
    assert c.fingerprint != a.fingerprint
    with pytest.raises(InvalidInputError, match="non-negative integer"):
        load_model("open_clip:ViT-S-32@seed=x")


def test_a_file_that_is_not_a_checkpoint_of_the_architecture_is_a_clear_error(tmp_path):
    save_file({"no.such.weight": torch.zeros(2)}, str(tmp_path / "alien.safetensors"))
    (tmp_path / "junk.safetensors").write_bytes(b"not a checkpoint at all")
    for name in ("alien.safetensors", "junk.safetensors"):
        with pytest.raises(InvalidInputError, match=f"{name} is not a checkpoint of ViT-S-32"):
            load_model(f"open_clip:ViT-S-32@{tmp_path / name}")
