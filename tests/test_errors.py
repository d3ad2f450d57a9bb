"""Every error platonic raises on purpose is a PlatonicError (so the command line catches one type).

An ast walk over src/platonic: no `raise` of a bare builtin exception class (ValueError, TypeError,
RuntimeError, KeyError, OSError, NotImplementedError, ...). The error types in `platonic.errors`
subclass the builtin a caller may rely on as well.
"""

from __future__ import annotations

import ast
import builtins
from collections import Counter
from pathlib import Path

import pytest

from platonic import errors

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "platonic"

# raises a protocol requires: module __getattr__ must raise AttributeError
PROTOCOL_RAISES = {("__getattr__", "AttributeError")}


def _builtin_exception(node: ast.Raise) -> str | None:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    if isinstance(exc, ast.Name):
        obj = getattr(builtins, exc.id, None)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            return exc.id
    return None


class _Raises(ast.NodeVisitor):
    """(enclosing function name, builtin class) of every bare builtin raise in one file."""

    def __init__(self):
        self.function, self.found = "<module>", []

    def visit_FunctionDef(self, node):
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Raise(self, node):
        exc = _builtin_exception(node) if node.exc is not None else None
        if exc:
            self.found.append((self.function, exc))


def builtin_raises() -> Counter:
    """(file relative to src/platonic, builtin class) -> how many raises, outside PROTOCOL_RAISES."""
    found: Counter = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        visitor = _Raises()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for function, exc in visitor.found:
            if (function, exc) not in PROTOCOL_RAISES:
                found[(path.relative_to(PACKAGE).as_posix(), exc)] += 1
    return found


def test_the_walk_finds_a_bare_builtin_raise():
    visitor = _Raises()
    visitor.visit(ast.parse("def f():\n    raise ValueError('x')\ndef g():\n    raise InvalidInputError('x')\n"
                            "def __getattr__(n):\n    raise AttributeError(n)\nraise KeyError\n"))
    assert visitor.found == [("f", "ValueError"), ("__getattr__", "AttributeError"), ("<module>", "KeyError")]


def test_no_bare_builtin_exception_is_raised():
    found = builtin_raises()
    assert not found, "bare builtin raises (use platonic.errors): " + ", ".join(
        f"{path}: {exc} x{n}" for (path, exc), n in sorted(found.items()))


@pytest.mark.parametrize("name", [n for n in dir(errors) if isinstance(getattr(errors, n), type)
                                  and issubclass(getattr(errors, n), Exception)
                                  and not issubclass(getattr(errors, n), Warning) and n != "PlatonicError"])
def test_every_error_type_is_a_platonic_error_and_a_builtin(name):
    cls = getattr(errors, name)
    assert issubclass(cls, errors.PlatonicError)
    assert any(b in cls.__mro__ for b in (ValueError, TypeError, OSError))


def test_descriptor_products_are_typeerrors_and_platonic_errors():
    from helpers import make_descriptor

    d = make_descriptor()
    with pytest.raises(errors.InvalidOperationError, match="scalars only"):
        d * d
    assert issubclass(errors.InvalidOperationError, TypeError)
