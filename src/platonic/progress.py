"""Progress bars (rich) that can be silenced: every long loop goes through `track`."""

from __future__ import annotations

import os
from typing import Iterable, TypeVar

T = TypeVar("T")


def progress_enabled(default: bool = True) -> bool:
    """False when PLATONIC_QUIET is set to a non-empty value other than 0."""
    quiet = os.environ.get("PLATONIC_QUIET", "")
    return default and quiet in ("", "0")


def track(items: Iterable[T], description: str, enabled: bool = True, total: int | None = None) -> Iterable[T]:
    """Iterate `items`, showing a rich progress bar when enabled (and PLATONIC_QUIET is unset)."""
    if not progress_enabled(enabled):
        yield from items
        return
    from rich.progress import track as rich_track

    yield from rich_track(items, description=description, total=total, transient=True)
