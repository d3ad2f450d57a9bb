"""Package exports imported on first access (PEP 562 module `__getattr__`).

Importing a package then costs nothing until one of its names is used. The command line relies on it:
it imports `platonic.errors`, `platonic.models` (spec checks) and `platonic.finetuning` (source checks)
before any work, and their packages' eager exports used to import torch and the backends with them.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Callable, Mapping


def lazy_exports(package: str, table: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for the package `package` whose public name N lives in its submodule
    `table[N]`: the submodule is imported on the first access of N, and N is kept in the package."""

    def __getattr__(name: str):  # noqa: N807 - the module protocol's name
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{table[name]}"), name)
        sys.modules[package].__dict__[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(sys.modules[package].__dict__) | set(table))

    return __getattr__, dir_
