"""Writes to a shared cache that two processes never make at once.

Every cache entry is written atomically already (`storage.atomic_write`: a temporary file renamed into
place), so a reader never sees half a file. `write_once(path, write)` adds the rule for many writers,
the processes of one launch or two launches sharing $PLATONIC_CACHE: under an exclusive lock of the
entry's folder (`flock` on FOLDER/.platonic.lock) it checks whether the entry exists and writes it only
if not, so the first writer wins and a second finds the entry and leaves it. The lock is held for the
check and the write only, never for the computation that produced the tensors. On a system without
`fcntl` (Windows) the check-and-write runs unlocked, and the atomic rename still keeps every file whole.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

LOCK_NAME = ".platonic.lock"


@contextmanager
def folder_lock(folder) -> Iterator[None]:
    """Hold the exclusive lock of `folder` (created if missing) inside the block."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def write_once(path, write: Callable[[], object]) -> bool:
    """Call `write()` (an atomic write of `path`) unless `path` exists, under its folder's lock; True if written."""
    path = Path(path)
    with folder_lock(path.parent):
        if path.exists():
            return False
        write()
        return True


__all__ = ["LOCK_NAME", "folder_lock", "write_once"]
