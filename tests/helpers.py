"""Builders shared by the tests."""

import numpy as np
import soundfile
import torch

from platonic import Descriptor, ProbeGrid, Provenance

# The folders whose tests `make test` runs as one unit each, on one worker (tests/conftest.py): every test of a
# built world (a session fixture) lives in its world's folder (tests/test_suite_scheduling.py checks it). Slowest
# first: the scheduler hands them out in this order.
WORLD_FOLDERS = ("tests/trunk_world/", "tests/world/", "tests/audio_zoo/", "tests/audio_world/")


def world_folder(path: str) -> str | None:
    """The world folder a test path or node id (relative to the repository root) lies in, or None."""
    return next((folder for folder in WORLD_FOLDERS if path.startswith(folder)), None)


def make_grid(task="toy", n=6, m=3, seed=0, prompts=None):
    probes = torch.randint(0, 256, (n, 3, 8, 8), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)
    prompts = prompts or [f"a photo of a {task} class {j}." for j in range(m)]
    return ProbeGrid.from_probes(task, prompts, probes)


def make_descriptor(grid=None, seed=0, source="model-a"):
    grid = grid or make_grid()
    matrix = torch.randn(grid.shape, generator=torch.Generator().manual_seed(seed))
    return Descriptor(matrix, grid, Provenance(source=source, finetune="test"))


def call_log(monkeypatch, module, name: str) -> list:
    """Replace module.name by a wrapper that records each call's first argument; returns the record."""
    calls = []
    real = getattr(module, name)

    def logged(item, *args, **kwargs):
        calls.append(item)
        return real(item, *args, **kwargs)

    monkeypatch.setattr(module, name, logged)
    return calls


RATE = 22050  # the files' own rate: every decode resamples to 16 kHz


def tone(freq: float, seconds: float, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def sound_folder(root, per_split=None, rate: int = RATE, seconds=(0.25, 0.5)):
    """root/{train,test}/{low,high}/*.wav: tones at 22.05 kHz of 0.25 s and 0.5 s (the longest is 0.5 s)."""
    per_split = per_split or {"train": 3, "test": 2}
    for split, n in per_split.items():
        for k, (cls, freq) in enumerate((("low", 300.0), ("high", 2000.0))):
            folder = root / split / cls
            folder.mkdir(parents=True)
            for i in range(n):
                soundfile.write(folder / f"{i}.wav", tone(freq, seconds[(i + k) % len(seconds)], rate), rate)
    return root
