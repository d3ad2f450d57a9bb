"""Where platonic keeps its caches: $PLATONIC_CACHE, else $XDG_CACHE_HOME/platonic, else ~/.cache/platonic."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    explicit = os.environ.get("PLATONIC_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "platonic"


def cache_dir(*parts: str) -> Path:
    """A sub-directory of the cache root, created on demand."""
    from .errors import ArtifactError

    path = cache_root().joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ArtifactError(f"cannot create the cache folder {path} ({exc.strerror}); set PLATONIC_CACHE to a "
                            "writable folder") from None
    return path
