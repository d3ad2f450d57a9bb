"""Fixtures of this folder; the models themselves are built in tiny_models.py."""

import pytest
import torch


@pytest.fixture
def image_probes():
    return torch.randint(0, 256, (3, 3, 224, 224), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


@pytest.fixture
def audio_probes():
    return 0.1 * torch.randn(3, 2 * 16000, generator=torch.Generator().manual_seed(0))  # 2 s of canonical 16 kHz audio


@pytest.fixture
def world_on_disk(tmp_path):
    """Image folders and a listed ViT-S-32 source under tmp_path (`image_folders.write_image_world`)."""
    from image_folders import write_image_world

    return write_image_world(tmp_path)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PLATONIC_QUIET", "1")
