"""A trunk world model's encoder that computes the frozen part of its tower once for the base and all its sources.

Every source of a trunk world model changes only the tower above the cut (`tower.Above`), so the base model and its
16 sources run the same stem and stages on the same inputs. `SharedTrunkEncoder` (platonic's open_clip encoder)
keeps those activations in a process-wide cache (`ACTIVATIONS`), keyed by the content of the input batch and of the
weights below the cut, and runs only what is above it:

    _forward_tower(x) = Above(visual)(below(visual, x))      with below(visual, x) cached

which equals `visual(x)` bit for bit (tests/trunk_world/test_trunk_world.py). The weights' digest is taken at the start
of every `encode_probes` call, and any module below the cut that is not the trunk's own (e.g. a LoRA layer
wrapped around one) turns the cache off for that call, so an edit below the cut is never served stale activations.
Measuring the trunk world's 48 sources on every task's probes drops from about 50 minutes of trunk forwards to
the base's once. Batches that need gradients or run under autocast are not cached.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import torch

from ....hashing import update_with_tensor
from ....models.open_clip_backend import OpenClipEncoder
from .tower import CUT_MODULES, Above, below, cut_of

CACHE_BYTES = 1 << 30  # 1 GiB of activations; least recently used batches go first


class ActivationCache:
    """(key -> activations, a tensor) within a byte budget, least recently used evicted first: one batch's
    (B, C, h, w) under its digest (`SharedTrunkEncoder`), or one image's (C, h, w) (`frozen.FrozenTrunkEncoder`)."""

    def __init__(self, limit: int = CACHE_BYTES):
        self.limit, self.size, self.items = limit, 0, OrderedDict()

    def peek(self, key) -> torch.Tensor | None:
        """The value kept under `key` (now the most recently used), or None."""
        if key not in self.items:
            return None
        self.items.move_to_end(key)
        return self.items[key]

    def put(self, key, value: torch.Tensor) -> None:
        """Keep `value` under `key` (a key already kept is left as it is), then evict down to the budget; the value
        just put stays even when it alone is over the budget."""
        if key in self.items:
            self.items.move_to_end(key)
            return
        self.items[key] = value
        self.size += value.numel() * value.element_size()
        while self.size > self.limit and len(self.items) > 1:
            _, old = self.items.popitem(last=False)
            self.size -= old.numel() * old.element_size()

    def get(self, key, compute) -> torch.Tensor:
        """The value under `key`, computed by `compute()` and kept when missing."""
        value = self.peek(key)
        if value is None:
            value = compute()
            self.put(key, value)
        return value

    def clear(self) -> None:
        self.items.clear()
        self.size = 0


ACTIVATIONS = ActivationCache()


def below_digest(visual) -> str | None:
    """sha256 over the weights below the cut and their modules' classes; None when a module there is not timm's,
    open_clip's or torch's own or the cut's (a wrapper such as a LoRA layer), so nothing below may be cached."""
    h = hashlib.sha256()
    for top in cut_of(visual).below(visual):
        for name, module in top.named_modules():
            kind = type(module).__module__
            if not kind.startswith(("timm.", "open_clip.", "torch.")) and not isinstance(module, CUT_MODULES):
                return None
            h.update(f"{name}:{kind}.{type(module).__name__};".encode())
        for name, tensor in top.state_dict().items():
            update_with_tensor(h, tensor, name)
    return h.hexdigest()


class SharedTrunkEncoder(OpenClipEncoder):
    """platonic's open_clip encoder of a trunk world model, with the activations below the cut shared (module doc)."""

    _below: str | None = None

    def encode_probes(self, probes, batch_size: int = 64, progress: bool = False):
        self._below = below_digest(self.model.visual)
        try:
            return super().encode_probes(probes, batch_size=batch_size, progress=progress)
        finally:
            self._below = None

    def _forward_tower(self, inputs: torch.Tensor) -> torch.Tensor:
        visual = self.model.visual
        if self._below is None or torch.is_grad_enabled() or torch.is_autocast_enabled(inputs.device.type):
            return super()._forward_tower(inputs)
        h = hashlib.sha256(self._below.encode())
        update_with_tensor(h, inputs)
        activations = ACTIVATIONS.get(h.hexdigest(), lambda: below(visual, inputs))
        return Above(visual)(activations)
