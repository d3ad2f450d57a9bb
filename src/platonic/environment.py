"""What a run or a build ran on: library versions and the CPU / device, for provenance records.

A world build on two machines can differ (docs/lab/2026-12-02-world-recipe-8c5849d4a076.md: the CPU's float kernels or the library
versions pip resolved); recording both in build.json and results.json is what lets a user tell which.
"""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

import torch

from ._version import __version__

LIBRARIES = ("torch", "open_clip_torch", "transformers", "peft", "huggingface_hub", "safetensors", "datasets",
             "torchvision", "pydantic", "numpy")


def library_versions() -> dict[str, str | None]:
    """platonic, Python and the libraries a run leans on (None: not installed)."""
    out: dict[str, str | None] = {"platonic": __version__, "python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def cpu_record() -> dict:
    """The CPU torch computes on: its name, the vector instructions torch's kernels use, the thread count."""
    return {"processor": platform.processor() or platform.machine(), "platform": platform.platform(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch_threads": torch.get_num_threads()}


def device_record(device: str) -> dict:
    """Where the run ran: the torch device, its name, threads, CUDA version."""
    dev = torch.device(device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else (platform.processor() or platform.machine())
    return {"device": str(dev), "name": name, "torch_threads": torch.get_num_threads(), "cuda": torch.version.cuda,
            "platform": platform.platform()}
