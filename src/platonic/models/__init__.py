"""Model backends behind one `DualEncoder` interface, chosen by the spec's prefix.

Specs:
    open_clip:ARCH/TAG          open_clip architecture with a pretrained tag (weights via open_clip's cache)
    open_clip:hf-hub:ORG/NAME   open_clip model from the Hugging Face hub
    open_clip:local-dir:DIR     open_clip model from a local directory in the hub layout (open_clip_config.json
                                + open_clip_model.safetensors), e.g. one platonic exported
    open_clip:ARCH              open_clip architecture with random weights drawn under seed 0 (a warning
                                says so): the same spec is the same model, so `solve` then `apply` agree
    open_clip:ARCH@seed=N       the same with seed N (another random draw)
    open_clip:ARCH@PATH         open_clip architecture with weights from a local file (a file literally
                                named seed=N is written with its directory: ARCH@./seed=N)
    hf:ORG/NAME[@REV]           transformers CLIPModel / SiglipModel / Siglip2Model / ClapModel (at revision REV)
    PATH (a directory)          a transformers save_pretrained directory of one of those
    world:NAME                  a model of platonic's embedded world (a backend registered by the
                                `platonic.world` package through the "platonic.backends" entry point)

The device is checked before any model is built (`--device cuda` without a GPU is a clear error).
`spec_files(spec)` names the local files or directories a spec reads, so that a command can refuse to
write its output over one of its inputs.
"""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .._checks import as_device
from ..errors import InvalidInputError
from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .base import DualEncoder

Loader = Callable[..., "DualEncoder"]
Checker = Callable[[str], None]

# the backends that live in this package: prefix -> module that registers it on import (imported
# lazily: torch-heavy libraries load on demand)
_BUILTIN_BACKENDS = {
    "open_clip": "platonic.models.open_clip_backend",
    "hf": "platonic.models.hf_backend",
}
# other packages (the embedded world among them) declare theirs as entry points of this group:
# name = the spec prefix, value = the module that calls `register_backend` on import
ENTRY_POINT_GROUP = "platonic.backends"
_LOADERS: dict[str, Loader] = {}
_CHECKERS: dict[str, Checker] = {}

ACCEPTED_FORMS = (
    "open_clip:ARCH/TAG, open_clip:hf-hub:ORG/NAME, open_clip:local-dir:DIR, open_clip:ARCH (random weights, seed 0), open_clip:ARCH@seed=N, "
    "open_clip:ARCH@FILE, hf:ORG/NAME, a local transformers directory, or PREFIX:NAME of an installed backend "
    "(world:NAME for the embedded world)"
)


@functools.cache
def _backend_modules() -> dict[str, str]:
    """prefix -> module for every backend: this package's own, then those declared as entry points."""
    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**found, **_BUILTIN_BACKENDS}


def backend_prefixes() -> tuple[str, ...]:
    """The spec prefixes a backend is known for ("open_clip", "hf", and any installed, e.g. "world")."""
    return tuple(sorted(set(_backend_modules()) | set(_LOADERS)))


def register_backend(prefix: str, loader: Loader, check: Checker | None = None) -> None:
    """Register `loader(rest, device=..., dtype=...)` for specs "prefix:rest"; refuses duplicates.

    `check(rest)`, when given, refuses a spec that cannot load without building the model (`check_spec`).
    """
    if prefix in _LOADERS and _LOADERS[prefix] is not loader:
        raise InvalidInputError(f"a backend for prefix {prefix!r} is already registered")
    _LOADERS[prefix] = loader
    if check is not None:
        _CHECKERS[prefix] = check


def _ensure_registered(prefix: str) -> None:
    if prefix not in _LOADERS and prefix in _backend_modules():
        importlib.import_module(_backend_modules()[prefix])
    if prefix not in _LOADERS:
        raise InvalidInputError(f"no backend registered for specs {prefix!r}:...; known: {', '.join(backend_prefixes())}")


def _loader(prefix: str) -> Loader:
    _ensure_registered(prefix)
    return _LOADERS[prefix]


# `DualEncoder` and `ProbeEmbeddings` (models.base, which imports torch) are imported on first access, so
# that the spec checks below run before a command loads anything heavy
__getattr__, __dir__ = lazy_exports(__name__, {"DualEncoder": "base", "ProbeEmbeddings": "base"})


def load_model(spec, device="cpu", dtype=None, **options) -> "DualEncoder":
    """Load a dual encoder from a spec string (see the module docstring); a DualEncoder passes through.

    `options` go to the backend, e.g. edit_site="append" (append a d x d linear to a tower that has
    no final linear map) or tokenizer=... (a tokenizer to use instead of the model's own).
    """
    from .base import DualEncoder

    if isinstance(spec, DualEncoder):
        return spec
    device = as_device(device)
    prefix, rest = _split_spec(spec)
    if prefix is not None:
        return _loader(prefix)(rest, device=device, dtype=dtype, **options)
    if Path(spec).is_dir():
        return _loader("hf")(spec, device=device, dtype=dtype, **options)
    raise InvalidInputError(f"cannot read model spec {spec!r}; accepted forms: {ACCEPTED_FORMS}")


def _split_spec(spec) -> tuple[str | None, str]:
    """(a backend prefix: "open_clip", "hf", "world", ..., the rest) for a backend-prefixed spec, (None, spec) otherwise; refuses
    an empty spec and a prefix with nothing after it."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidInputError(f"a model spec must be a non-empty string; accepted forms: {ACCEPTED_FORMS}")
    prefix, sep, rest = spec.partition(":")
    if not (sep and prefix in backend_prefixes()):
        return None, spec
    if not rest:
        raise InvalidInputError(f"model spec {spec!r} names no model after '{prefix}:'; accepted forms: {ACCEPTED_FORMS}")
    return prefix, rest


def check_spec(spec) -> None:
    """Refuse a spec that cannot load, where that is known without building the model (a command runs
    this before its other checks and its work): its form, an open_clip architecture, tag or weights
    file. Hub names and world models are checked when they load."""
    prefix, rest = _split_spec(spec)
    if prefix == "open_clip":  # checked without importing the backend (torch, open_clip)
        from .open_clip_specs import check_spec as check_open_clip

        check_open_clip(rest)
    elif prefix in _BUILTIN_BACKENDS:
        return  # a hub name: checked when it loads
    elif prefix is not None:
        _ensure_registered(prefix)
        if prefix in _CHECKERS:
            _CHECKERS[prefix](rest)
    elif not Path(spec).is_dir():
        raise InvalidInputError(f"cannot read model spec {spec!r}; accepted forms: {ACCEPTED_FORMS}")


def has_backend_prefix(spec) -> bool:
    """True for a spec that names a backend ("open_clip:...", "hf:...", "world:...")."""
    return isinstance(spec, str) and spec.partition(":")[0] in backend_prefixes() and ":" in spec


def spec_files(spec) -> list[Path]:
    """The local files or directories a model spec reads (none for hub names, tags or random weights).

    open_clip:ARCH@FILE -> [FILE]; a local transformers directory, or hf:DIR -> [DIR]; else [].
    """
    if not isinstance(spec, str):
        return []
    prefix, sep, rest = spec.partition(":")
    if sep and prefix == "open_clip" and rest.startswith("local-dir:"):
        return [Path(rest.removeprefix("local-dir:"))]
    if sep and prefix == "open_clip" and "@" in rest and not rest.startswith("hf-hub:"):
        after = rest.split("@", 1)[1]
        return [] if after.startswith("seed=") and after.removeprefix("seed=").isdigit() else [Path(after)]
    if sep and prefix == "hf" and Path(rest).exists():
        return [Path(rest)]
    if not (sep and prefix in backend_prefixes()) and Path(spec).exists():
        return [Path(spec)]
    return []


def resolve_spec_paths(spec: str, root: Path) -> str:
    """`spec` with a relative local path in it (ARCH@FILE, a transformers directory) read from `root`.

    For setups written in a file (YAML): their relative paths mean the file's folder, not the working
    directory. Hub names, tags, seeds and absolute paths are unchanged.
    """
    prefix, sep, rest = spec.partition(":")
    if sep and prefix == "open_clip" and rest.startswith("local-dir:"):
        folder = Path(rest.removeprefix("local-dir:")).expanduser()
        return spec if folder.is_absolute() else f"open_clip:local-dir:{root / folder}"
    if sep and prefix == "open_clip" and "@" in rest and not rest.startswith("hf-hub:"):
        arch, after = rest.split("@", 1)
        if (after.startswith("seed=") and after.removeprefix("seed=").isdigit()) or Path(after).expanduser().is_absolute():
            return spec
        return f"open_clip:{arch}@{root / Path(after).expanduser()}"
    if sep and prefix in backend_prefixes():
        if prefix == "hf" and not Path(rest).is_absolute() and (root / rest).is_dir():
            return f"hf:{root / rest}"
        return spec
    path = Path(spec).expanduser()
    return spec if path.is_absolute() else str(root / path)


__all__ = ["ACCEPTED_FORMS", "DualEncoder", "ENTRY_POINT_GROUP", "backend_prefixes", "check_spec", "ProbeEmbeddings", "has_backend_prefix", "load_model", "register_backend", "resolve_spec_paths",
           "spec_files"]
