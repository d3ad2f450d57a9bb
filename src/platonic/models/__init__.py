"""Model backends behind one `DualEncoder` interface, chosen by the spec's prefix.

Specs:
    open_clip:ARCH/TAG          open_clip architecture with a pretrained tag (weights via open_clip's cache)
    open_clip:hf-hub:ORG/NAME   open_clip model from the Hugging Face hub
    open_clip:ARCH              open_clip architecture with random weights (a warning says so)
    open_clip:ARCH@PATH         open_clip architecture with weights from a local file
    hf:ORG/NAME                 transformers CLIPModel / SiglipModel / Siglip2Model / ClapModel
    PATH (a directory)          a transformers save_pretrained directory of one of those
    world:NAME                  a model of platonic's embedded world
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Callable

from ..errors import InvalidInputError
from .base import DualEncoder, ProbeEmbeddings

Loader = Callable[..., DualEncoder]

# prefix -> module that registers it on import (imported lazily: torch-heavy libraries load on demand)
_BACKEND_MODULES = {
    "open_clip": "platonic.models.open_clip_backend",
    "hf": "platonic.models.hf_backend",
    "world": "platonic.world.zoo",
}
_LOADERS: dict[str, Loader] = {}

ACCEPTED_FORMS = (
    "open_clip:ARCH/TAG, open_clip:hf-hub:ORG/NAME, open_clip:ARCH (random weights), open_clip:ARCH@FILE, "
    "hf:ORG/NAME, a local transformers directory, or world:NAME"
)


def register_backend(prefix: str, loader: Loader) -> None:
    """Register `loader(rest, device=..., dtype=...)` for specs "prefix:rest"; refuses duplicates."""
    if prefix in _LOADERS and _LOADERS[prefix] is not loader:
        raise ValueError(f"a backend for prefix {prefix!r} is already registered")
    _LOADERS[prefix] = loader


def _loader(prefix: str) -> Loader:
    if prefix not in _LOADERS and prefix in _BACKEND_MODULES:
        importlib.import_module(_BACKEND_MODULES[prefix])
    return _LOADERS[prefix]


def load_model(spec, device="cpu", dtype=None, **options) -> DualEncoder:
    """Load a dual encoder from a spec string (see the module docstring); a DualEncoder passes through.

    `options` go to the backend, e.g. edit_site="append" (append a d x d linear to a tower that has
    no final linear map) or tokenizer=... (a tokenizer to use instead of the model's own).
    """
    if isinstance(spec, DualEncoder):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidInputError(f"a model spec must be a non-empty string; accepted forms: {ACCEPTED_FORMS}")
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in _BACKEND_MODULES:
        if not rest:
            raise InvalidInputError(f"model spec {spec!r} names no model after '{prefix}:'; accepted forms: {ACCEPTED_FORMS}")
        return _loader(prefix)(rest, device=device, dtype=dtype, **options)
    if Path(spec).is_dir():
        return _loader("hf")(spec, device=device, dtype=dtype, **options)
    raise InvalidInputError(f"cannot read model spec {spec!r}; accepted forms: {ACCEPTED_FORMS}")


__all__ = ["ACCEPTED_FORMS", "DualEncoder", "ProbeEmbeddings", "load_model", "register_backend"]
