"""Content hashes of tensors: dtype, shape and raw bytes, so equal hashes mean identical tensors."""

from __future__ import annotations

import hashlib

import torch


def update_with_tensor(h: "hashlib._Hash", t: torch.Tensor, name: str = "") -> None:
    """Feed `name|dtype|shape|` and the tensor's bytes (C order, on CPU) into hash `h`."""
    t = t.detach().cpu().contiguous()
    h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())


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
