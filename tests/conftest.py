import os
import shutil
import tempfile

# Tests never touch the network: transformers / huggingface_hub must fail fast instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest
import torch
from helpers import WORLD_FOLDERS, world_folder

if os.environ.get("PYTEST_XDIST_WORKER"):  # two workers on two cores: one thread each, not four on two
    torch.set_num_threads(1)


def pytest_configure(config):
    """The suite's own cache folder (PLATONIC_CACHE, one per process: each xdist worker makes its own), removed at
    the end: no test reads the user's ~/.cache/platonic, where an entry of an earlier run or version could stand in
    for what the test computes, nor fills it. A test that needs another folder sets PLATONIC_CACHE itself."""
    config.suite_cache = tempfile.mkdtemp(prefix="platonic-suite-cache-")
    config.user_cache = os.environ.get("PLATONIC_CACHE")
    os.environ["PLATONIC_CACHE"] = config.suite_cache


def pytest_unconfigure(config):
    shutil.rmtree(config.suite_cache, ignore_errors=True)
    if config.user_cache is None:
        os.environ.pop("PLATONIC_CACHE", None)
    else:
        os.environ["PLATONIC_CACHE"] = config.user_cache


@pytest.fixture
def one_torch_thread():
    """Torch on one thread for the test, as `make test`'s workers have it, in a plain `pytest` run too (a module
    asks for it with `pytestmark = pytest.mark.usefixtures("one_torch_thread")`)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(0)


def unit(x):
    return torch.nn.functional.normalize(x, dim=1)


# Under pytest-xdist (`make test` runs `-n 2 --dist loadfile`) a worker builds each session fixture it uses, so the
# tests of one built world go to one worker together: every test under a world folder (tests/trunk_world/: the image
# world on pretrained trunks; tests/world/: the tiny image world; tests/audio_zoo/: the tiny audio world;
# tests/audio_world/: its data) is one unit; any other test goes with its file (whose module-scoped fixtures are then
# built once). The world units are the longest, so they are handed out first, in WORLD_FOLDERS' order (slowest
# first): the two workers each start on a world and share the many short files at the end.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class WorldsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return world_folder(nodeid) or nodeid.split("::", 1)[0]

        def _assign_work_unit(self, node) -> None:
            for folder in reversed(WORLD_FOLDERS):
                if folder in self.workqueue:
                    self.workqueue.move_to_end(folder, last=False)
            super()._assign_work_unit(node)

    return WorldsTogether(config, log)
