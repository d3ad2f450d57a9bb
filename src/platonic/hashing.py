"""Content hashes of tensors: dtype, shape and raw bytes, so equal hashes mean identical tensors."""

from __future__ import annotations

import hashlib
import weakref
from contextlib import contextmanager

import torch


def update_with_tensor(h: "hashlib._Hash", t: torch.Tensor, name: str = "") -> None:
    """Feed `name|dtype|shape|` and the tensor's bytes (C order, on CPU) into hash `h`."""
    t = t.detach().cpu().contiguous()
    h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy())  # the array's buffer itself: no copy of the bytes


def tensor_digest(t: torch.Tensor) -> str:
    h = hashlib.sha256()
    update_with_tensor(h, t)
    return h.hexdigest()


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over named tensors (each fed as `update_with_tensor` does), in name order."""
    h = hashlib.sha256()
    for name, t in sorted(tensors.items()):
        update_with_tensor(h, t, name)
    return h.hexdigest()


# id(tensor) -> (weak reference, state, digest) while `remembered_digests` is active, else None
_REMEMBERED: dict | None = None


@contextmanager
def remembered_digests():
    """Inside the block `input_digest` hashes each unchanged input tensor once.

    For loops that name the same inputs many times: an experiment measures every source fine-tune on every
    task's probes, and each measurement names the probes four times (the probe store, the grid, the two
    embedding-cache entries), 20 MB an audio task. A tensor counts as unchanged while it is the same live object
    with the same storage, layout and version counter (torch bumps it on every in-place op), so the block's code
    must not write to its inputs behind torch's back (through `.numpy()` or `.data`); the experiment engine
    never writes to its probes. Nested blocks share the outer one's memory; it is dropped on leaving it.
    """
    global _REMEMBERED
    if _REMEMBERED is not None:
        yield
        return
    _REMEMBERED = {}
    try:
        yield
    finally:
        _REMEMBERED = None


def input_digest(t: torch.Tensor) -> str:
    """`tensor_digest(t)`, remembered for the unchanged tensor inside a `remembered_digests` block."""
    if _REMEMBERED is None:
        return tensor_digest(t)
    state = (t._version, t.data_ptr(), t.dtype, tuple(t.shape), t.stride(), t.storage_offset(), str(t.device))
    hit = _REMEMBERED.get(id(t))
    if hit is not None and hit[0]() is t and hit[1] == state:
        return hit[2]
    digest = tensor_digest(t)
    _REMEMBERED[id(t)] = (weakref.ref(t), state, digest)
    return digest
