import os

# Tests never touch the network: transformers / huggingface_hub must fail fast instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest
import torch
from helpers import world_folder

if os.environ.get("PYTEST_XDIST_WORKER"):  # two workers on two cores: one thread each, not four on two
    torch.set_num_threads(1)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(0)


def unit(x):
    return torch.nn.functional.normalize(x, dim=1)


# Under pytest-xdist (`make test` runs `-n 2 --dist loadfile`) a worker builds each session fixture it uses, so the
# tests of one built world go to one worker together: every test under tests/world/ (the tiny image world, the trunk
# world), tests/audio_zoo/ (the tiny audio world) or tests/audio_world/ (its data) is one unit; any other test goes
# with its file (whose module-scoped fixtures are then built once).
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class WorldsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return world_folder(nodeid) or nodeid.split("::", 1)[0]

    return WorldsTogether(config, log)
