import os

# Tests never touch the network: transformers / huggingface_hub must fail fast instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest
import torch


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(0)


def unit(x):
    return torch.nn.functional.normalize(x, dim=1)
