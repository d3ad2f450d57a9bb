"""What both worlds' builds share on the worker side: single-threaded worker processes, deterministic torch,
the seed of a model from the world seed, and a world's inputs (data and caption cache) read once per process.

Each job seeds itself (`model_seed`), so the weights do not depend on the number of workers.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Callable

import torch
from safetensors import safe_open

from ...storage import atomic_write
from .text import SentenceEncoder
from .weights import META_KEY

_INPUTS: dict = {}


def set_determinism(threads: int = 1) -> None:
    """One job's torch: `threads` threads, deterministic algorithms where torch has them."""
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)


def model_seed(spec, seed: int) -> int:
    """The seed of model `spec` in the world of seed `seed`."""
    return spec.seed + 1000 * seed


def _init_worker() -> None:
    torch.set_num_threads(1)


def build_workers(workers: int | None = None) -> int:
    """The processes a world build runs its jobs on: `workers`, else $PLATONIC_WORLD_WORKERS, else 2."""
    return workers or int(os.environ.get("PLATONIC_WORLD_WORKERS", "2"))


def write_build_record(path: Path, build: dict, kinds=None) -> None:
    """A built world's build.json, then its COMPLETE marker (naming the source `kinds` built, where the world has
    kinds); both atomic, so a world is complete exactly when the marker is there."""
    atomic_write(path / "build.json", lambda tmp: Path(tmp).write_text(json.dumps(build, indent=1, sort_keys=True)))
    marker = {"built": time.time(), **({} if kinds is None else {"kinds": list(kinds)})}
    atomic_write(path / "COMPLETE", lambda tmp: Path(tmp).write_text(json.dumps(marker)))


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """Single-threaded workers started by a fork server.

    Not plain fork: a process that has already run torch's OpenMP pool or the tokenizers' threads (a test
    session, a notebook) can fork a child while another thread holds a lock, and the child then waits on it
    for ever (seen once in CI: the test session and both workers in futex waits). The fork server is a fresh
    process with no such threads, and the jobs read their inputs from disk (`world_inputs`), so nothing of the
    caller's state is needed. Like spawn, it re-imports the caller's `__main__`: a script that builds a world
    keeps its work under `if __name__ == "__main__":`.
    """
    return ProcessPoolExecutor(max_workers=workers, mp_context=get_context("forkserver"), initializer=_init_worker)


def read_captions(world: Path) -> tuple[list[str], torch.Tensor]:
    """(vocab, embeddings (V, 384)) of a world's caption cache; the shared sentence encoder is preloaded with them."""
    with safe_open(str(Path(world) / "captions.safetensors"), framework="pt") as f:
        vocab = json.loads(f.metadata()[META_KEY])["vocab"]
        emb = f.get_tensor("embeddings")
    SentenceEncoder.shared().preload(vocab, emb)
    return vocab, emb


def world_inputs(world: Path, read_data: Callable[[Path], dict]) -> tuple[dict, list[str], torch.Tensor]:
    """(data, vocab, caption embeddings) of the world at `world`, read once per process (one world at a time);
    `read_data(world)` reads its data."""
    key = str(world)
    if key not in _INPUTS:
        data = read_data(Path(world))
        vocab, emb = read_captions(world)
        _INPUTS.clear()
        _INPUTS[key] = (data, vocab, emb)
    return _INPUTS[key]
