"""Fine-tunes that cannot be read, or that changed nothing, are named as such (issue 12)."""

import json

import pytest
from tiny_models import get_model
from safetensors.torch import save_file
from test_measure_transfer import PROMPTS, probes_n

from platonic import ArtifactError, InvalidInputError
from platonic.errors import ZeroDescriptorWarning
from platonic.measurement import EmbeddingCache, measure


def test_an_empty_finetune_warns_that_its_descriptor_is_zero(tmp_path):
    pre = get_model("open_clip:ViT-S-32")
    with pytest.warns(ZeroDescriptorWarning, match="changed nothing.*all zeros"):
        measure(pre, pre, probes_n(2), PROMPTS, "toy", cache=EmbeddingCache(tmp_path / "c"))
    save_file({}, str(tmp_path / "empty.safetensors"))
    with pytest.raises(InvalidInputError, match="holds no tensors"):
        measure(pre, tmp_path / "empty.safetensors", probes_n(2), PROMPTS, "toy", cache=EmbeddingCache(tmp_path / "c"))


def test_a_malformed_adapter_config_is_a_clear_error(tmp_path):
    pre = get_model("hf:tiny-clip")
    (tmp_path / "lora").mkdir()
    (tmp_path / "lora" / "adapter_config.json").write_text("{not json")
    with pytest.raises(ArtifactError, match="not a valid peft adapter config"):
        measure(pre, tmp_path / "lora", probes_n(2), PROMPTS, "toy")
    (tmp_path / "lora" / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4, "target_modules": ["q_proj"]}))
    with pytest.raises(ArtifactError, match="no adapter_model.safetensors"):
        measure(pre, tmp_path / "lora", probes_n(2), PROMPTS, "toy")
