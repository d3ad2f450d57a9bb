"""Checks a command runs before any work, so that a bad output path costs nothing.

- an output must not be one of the command's inputs, contain one (a directory export replaces
  everything under its path) or lie inside an input folder (a probe folder, a data folder: what is
  written there becomes an input);
- its directory must exist and be writable, and an existing output must be a previous output of the
  same kind (else `--overwrite`);
- the cache (`platonic.paths.cache_root`) must be writable.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from .errors import ArtifactError, InvalidInputError
from .paths import cache_root
from .storage import refuse_existing


def same_path(a, b) -> bool:
    """True when `a` and `b` name one file or directory (or would: compared resolved when missing)."""
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def inside(inner, outer) -> bool:
    """True when the path `inner` lies strictly below the folder `outer` (compared resolved)."""
    inner, outer = Path(inner).resolve(), Path(outer).resolve()
    return inner != outer and outer in inner.parents


def refuse_output_among_inputs(outputs: dict[str, Path | None], inputs: Iterable) -> None:
    """Raise when an output path (option name -> path) is, contains, or lies inside one of the `inputs` paths."""
    paths = [Path(p) for p in inputs if p is not None]
    for option, out in outputs.items():
        if out is None:
            continue
        for given in paths:
            if same_path(out, given):
                raise InvalidInputError(f"{option} {out} is also an input of this command; writing it would destroy "
                                        "that input. Choose another output path")
            if out.is_dir() and inside(given, out):
                raise InvalidInputError(f"{option} {out} contains the input {given}; replacing it would destroy that "
                                        "input. Choose another output path")
            if given.is_dir() and inside(out, given):
                raise InvalidInputError(f"{option} {out} is inside the input folder {given}, so it is an input too: "
                                        "writing it would change that input. Choose a path outside it")


def check_writable_directory(directory, what: str) -> None:
    """Raise unless `directory` exists, is a directory and can be written."""
    directory = Path(directory) if str(directory) else Path(".")
    if not directory.is_dir():
        raise ArtifactError(f"cannot write {what}: directory {directory} does not exist; create it first")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ArtifactError(f"cannot write {what}: directory {directory} is not writable; choose another place")


def check_output(path, replaceable=None, overwrite: bool = False, what: str = "output of this kind",
                 directory: bool = False) -> None:
    """The output `path` can be written: its parent is a writable directory and an existing `path` is
    replaceable (or `overwrite`). `directory`: the output is a directory (else a file)."""
    path = Path(path)
    check_writable_directory(path.parent, str(path))
    if not directory and path.is_dir():
        raise ArtifactError(f"{path} is a directory; give a file name to write to")
    if directory:
        resolved, cwd = path.resolve(), Path.cwd().resolve()
        if resolved == cwd or resolved in cwd.parents:
            raise ArtifactError(f"{path} is the working directory or contains it, and a write would replace it; "
                                "give a new directory name, e.g. -o edited/")
    refuse_existing(path, replaceable, overwrite, what)


def nearest_existing(path: Path) -> tuple[Path, bool]:
    """(the nearest existing folder at or above `path`, whether it is a directory we can write into)."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe, probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)


def check_cache_writable() -> Path:
    """The cache root, if it (or the nearest existing folder above it) can be written; else raise."""
    root = cache_root()
    probe, writable = nearest_existing(root)
    if not writable:
        raise ArtifactError(f"the cache {root} cannot be written ({probe} is not a writable directory); "
                            "set PLATONIC_CACHE to a writable folder")
    return root
