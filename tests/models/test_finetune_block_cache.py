"""The YAML `finetune:` block caches its fine-tunes: a second run with the same settings and data trains nothing."""

import pytest
import torch
from tiny_models import get_model  # noqa: F401 - the session's model cache
from image_folders import setup_yaml

from platonic.experiments.setups import yaml as config_module
from platonic.experiments.engine import finetune_cache
from platonic.experiments.setups import config_setup, read_config


def _one_task(root, **extra):
    return read_config(setup_yaml(root, tasks={"reds": {"data": "data/reds"}}, related_group=[], held_out=None,
                                  sources={}, **extra))


@pytest.mark.slow
def test_the_second_run_reads_every_made_source_from_the_cache(world_on_disk, monkeypatch):
    config = _one_task(world_on_disk)
    first = config_setup(config, progress=False)
    # vit and vit2 are one spec, so the same weights: the key is the fingerprint, and vit2 reads vit's entry
    assert first.diagnostics["finetunes"] == {"vit/reds": "trained", "vit2/reds": "cached"}
    calls = []
    monkeypatch.setattr(finetune_cache, "finetune", lambda *a, **k: calls.append(a) or pytest.fail("trained on a hit"))
    monkeypatch.setattr(config_module, "finetune", lambda *a, **k: calls.append(a) or pytest.fail("trained on a hit"))
    second = config_setup(config, progress=False)
    assert calls == []
    assert second.diagnostics["finetunes"] == {"vit/reds": "cached", "vit2/reds": "cached"}
    for key, d in first.descriptors.items():
        assert torch.allclose(d.matrix, second.descriptors[key].matrix, atol=1e-6)


@pytest.mark.slow
def test_a_changed_setting_or_lambda_misses_the_cache(world_on_disk):
    config_setup(_one_task(world_on_disk), progress=False)
    for change in ({"lr": 2e-3}, {"orthoreg": 0.5}):
        block = {"mode": "lora", "steps": 1, "batch_size": 4, "lr": 1e-3, **change}
        again = config_setup(_one_task(world_on_disk, finetune=block), progress=False)
        assert again.diagnostics["finetunes"]["vit/reds"] == "trained", change
    entries = sorted(p.name for p in (world_on_disk / "cache" / "finetunes").rglob("*.safetensors"))
    assert any(".lam0.5." in name for name in entries) and all(name.startswith("reds.lora.") for name in entries)
