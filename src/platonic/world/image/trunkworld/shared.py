"""A trunk world model's encoder that computes the frozen part of its tower once for the base and all its sources.

Every source of a trunk world model changes only the tower above the cut (`tower.Above`), so the base model and its
16 sources run the same stem and stages on the same inputs. `SharedTrunkEncoder` (platonic's open_clip encoder)
keeps those activations in a process-wide cache (`ACTIVATIONS`), keyed by the content of the input batch (and its
device) and of the weights below the cut, and runs only what is above it:

    _forward_tower(x) = Above(visual)(below(visual, x))      with below(visual, x) cached

which equals `visual(x)` bit for bit (tests/trunk_world/test_trunk_world.py). The weights' digest is taken at the start
of every `encode_probes` call, and any module below the cut that is not the trunk's own (e.g. a LoRA layer
wrapped around one) turns the cache off for that call, so an edit below the cut is never served stale activations.
Measuring the trunk world's 48 sources on every task's probes drops from about 50 minutes of trunk forwards to
the base's once. Batches that need gradients or run under autocast are not cached.

The text side likewise: every trunk world model and student reads its prompts through the same frozen MiniLM
and its own projection, so `encode_texts` keeps MiniLM's pooled features of a token batch (`TEXT_FEATURES`), keyed
by the tokens, their device and the digest of the text tower below its projection, and applies the model's
projection:

    encode_texts(t) = proj(pooled_text(text, tokens(t)))      with pooled_text cached

equal to open_clip's `encode_text` bit for bit. That digest is taken again whenever those modules or their tensors
differ, by a single bit, from the ones it was last taken of (`text_digest`), however they were changed: peft's merge
writes through `.data`, unseen by torch's version counters. Texts encoded under autocast are not cached.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

import torch
from torch import nn

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
TEXT_FEATURES = ActivationCache(1 << 26)  # 64 MiB of pooled text features, (B, 384) a batch


def own_modules(tops, packages: tuple[str, ...], also: tuple[type, ...] = ()) -> bool:
    """True when every module under `tops` is a class of `packages` (module-name prefixes) or of `also`; a wrapper
    (a LoRA layer, peft's) is not, so what it wraps may not be served from a cache."""
    return all(type(m).__module__.startswith(packages) or isinstance(m, also) for top in tops for m in top.modules())


def modules_digest(tops, packages: tuple[str, ...], also: tuple[type, ...] = ()) -> str | None:
    """sha256 over the modules under `tops` (names and classes) and their state, in order; None unless
    `own_modules(tops, packages, also)`."""
    if not own_modules(tops, packages, also):
        return None
    h = hashlib.sha256()
    for top in tops:
        for name, module in top.named_modules():
            h.update(f"{name}:{type(module).__module__}.{type(module).__name__};".encode())
        for name, tensor in top.state_dict().items():
            update_with_tensor(h, tensor, name)
    return h.hexdigest()


def below_digest(visual) -> str | None:
    """sha256 over the weights below the cut and their modules' classes; None when a module there is not timm's,
    open_clip's or torch's own or the cut's (a wrapper such as a LoRA layer), so nothing below may be cached."""
    return modules_digest(cut_of(visual).below(visual), ("timm.", "open_clip.", "torch."), CUT_MODULES)


TEXT_PACKAGES = ("transformers.", "open_clip.", "torch.")


def text_below_projection(text: nn.Module) -> tuple[nn.Module, ...] | None:
    """open_clip's HF text tower (`HFTextEncoder`: a transformers model, a pooler, a projection) -> its modules below
    the projection (the transformer, the pooler); None for any other text tower, or when a module there is not
    transformers', open_clip's or torch's own (a wrapper such as a LoRA layer)."""
    if type(text).__name__ != "HFTextEncoder" or not all(hasattr(text, a) for a in ("transformer", "pooler", "proj")):
        return None
    below = (text.transformer, text.pooler)
    return below if own_modules(below, TEXT_PACKAGES) else None


def pooled_text(text: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """open_clip's HF text tower up to its projection: (B, L) token ids -> (B, W) pooled features, by open_clip's own
    forward with the projection swapped for an identity, so text.proj(pooled_text(text, tokens)) == text(tokens)."""
    proj, text.proj = text.proj, nn.Identity()
    try:
        return text(tokens)
    finally:
        text.proj = proj


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when `a` and `b` hold the same bytes (dtype, shape, device and every element's bits: 0.0 and -0.0
    differ, a NaN equals itself), compared as integers of the element's size."""
    if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
        return False
    as_int = _SAME_SIZE_INT.get(a.element_size())
    return as_int is not None and torch.equal(a.view(as_int), b.view(as_int))


# (digest, module structure, [(name, copied tensor)]) of the text tower `text_digest` hashed last, process-wide
_TEXT_REFERENCE: tuple | None = None


def text_digest(text: nn.Module) -> str | None:
    """`modules_digest` of a text tower below its projection (None when `text_below_projection` refuses the tower),
    taken again unless the modules there and their tensors equal, bit for bit, the ones the last digest was taken of.

    Neither a tensor's identity nor its version counter would do: peft's merge (`merge_and_unload`, which platonic's
    LoRA sources call) adds the update through `weight.data`, which bumps no version counter and keeps the storage.
    The reference (the modules' names and classes, a copy of their tensors: MiniLM's 90 MB) is one per process,
    shared by every encoder, since the world's models all read the same MiniLM; the byte compare costs a fraction
    of the hash. A tower that differs from it is hashed and becomes the reference."""
    global _TEXT_REFERENCE
    below = text_below_projection(text)
    if below is None:
        return None
    structure = [(k, name, type(m)) for k, top in enumerate(below) for name, m in top.named_modules()]
    tensors = [(f"{k}.{name}", t) for k, top in enumerate(below) for name, t in top.state_dict().items()]
    ref = _TEXT_REFERENCE
    if ref is None or ref[1] != structure or len(ref[2]) != len(tensors) or not all(
            a == n and same_bits(copy, t) for (a, copy), (n, t) in zip(ref[2], tensors)):
        _TEXT_REFERENCE = ref = (modules_digest(below, TEXT_PACKAGES), structure,
                                 [(n, t.detach().clone()) for n, t in tensors])
    return ref[0]


class SharedTrunkEncoder(OpenClipEncoder):
    """platonic's open_clip encoder of a trunk world model, with the activations below the cut shared (module doc)."""

    _below: str | None = None

    def encode_probes(self, probes, batch_size: int = 64, progress: bool = False):
        self._below = below_digest(self.model.visual)
        try:
            return super().encode_probes(probes, batch_size=batch_size, progress=progress)
        finally:
            self._below = None

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        text = getattr(self.model, "text", None)
        if text is None or torch.is_autocast_enabled(self.device.type):
            return super().encode_texts(texts)
        digest = text_digest(text)
        if digest is None:
            return super().encode_texts(texts)
        tokens = self.tokenizer(list(texts)).to(self.device)
        h = hashlib.sha256(f"{digest}|{tokens.device}".encode())  # features stay on the device that computed them
        update_with_tensor(h, tokens)
        pooled = TEXT_FEATURES.get(h.hexdigest(), lambda: pooled_text(text, tokens))
        return text.proj(pooled).float().cpu()

    def _forward_tower(self, inputs: torch.Tensor) -> torch.Tensor:
        visual = self.model.visual
        if self._below is None or torch.is_grad_enabled() or torch.is_autocast_enabled(inputs.device.type):
            return super()._forward_tower(inputs)
        h = hashlib.sha256(f"{self._below}|{inputs.device}".encode())
        update_with_tensor(h, inputs)
        activations = ACTIVATIONS.get(h.hexdigest(), lambda: below(visual, inputs))
        return Above(visual)(activations)
