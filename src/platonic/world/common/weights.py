"""Storage of world weights: safetensors with one JSON record under `META_KEY` (no pickle, atomic writes)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from ...errors import ArtifactError
from ...storage import write_tensors

META_KEY = "platonic_world"


def save_weights(path, state: dict, meta: dict) -> Path:
    """Atomic safetensors write of `state` with `meta` as JSON metadata (key "platonic_world")."""
    return write_tensors(path, state, meta, key=META_KEY, make_parents=True)


def load_weights(path, keys=None) -> tuple[dict[str, torch.Tensor], dict]:
    """A world weights file's tensors (only `keys` of them where given; a key it lacks is left out) and its metadata."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path} does not exist; build the world with `platonic world build`")
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads((f.metadata() or {}).get(META_KEY, "{}"))
        tensors = {k: f.get_tensor(k) for k in f.keys() if keys is None or k in keys}
    return tensors, meta
