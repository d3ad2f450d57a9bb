"""The terms of an adapter fit: descriptors with signed coefficients, checked, and picked by "task[@source]".

`as_terms` accepts a Descriptor, a Composition or (coefficient, Descriptor) pairs and refuses a
descriptor given twice; `select_terms` matches a command line's "task" / "task@source" keys to the
descriptor files given. Both are re-exported by `platonic.adapter`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ._checks import as_finite_scalar
from .descriptor import Composition, Descriptor
from .errors import InvalidInputError
from .hashing import tensor_digest


def as_terms(terms) -> list[tuple[float, Descriptor]]:
    """A Descriptor, a Composition, or (coefficient, Descriptor) pairs -> checked [(c, U)], no duplicates."""
    if isinstance(terms, Descriptor):
        terms = Composition.of(terms)
    if isinstance(terms, Composition):
        pairs = list(terms.terms)
    else:
        try:
            pairs = [(c, d) for c, d in terms]
        except (TypeError, ValueError):
            raise InvalidInputError("adapter terms are a Descriptor, a Composition or (coefficient, Descriptor) pairs") from None
        pairs = [(as_finite_scalar("adapter term coefficient", c), d) for c, d in pairs]
    if not pairs:
        raise InvalidInputError("the adapter needs at least one term (coefficient, descriptor)")
    seen = set()
    for c, d in pairs:
        if not isinstance(d, Descriptor):
            raise InvalidInputError(f"adapter term {c!r}: {type(d).__name__} is not a Descriptor")
        d.require_plausible_scale()
        key = tensor_digest(d.matrix), d.grid
        if key in seen:
            raise InvalidInputError(f"the descriptor of {d.task} ({d.provenance.source}) appears twice among the terms; "
                                    "give it once with the summed coefficient")
        seen.add(key)
    return pairs


def select_terms(descriptors: Sequence[Descriptor], terms: Mapping[str, float]) -> list[tuple[float, Descriptor]]:
    """Match "task" or "task@source" keys of `terms` to `descriptors` -> [(coefficient, descriptor)]."""
    chosen = []
    for key, c in terms.items():
        task, _, source = key.partition("@")
        found = [d for d in descriptors if d.task == task and (not source or d.provenance.source == source)]
        if not found:
            have = ", ".join(f"{d.task}@{d.provenance.source}" for d in descriptors) or "none"
            raise InvalidInputError(f"term {key!r} has no descriptor among the ones given ({have}); "
                                    f"add its .utd file (--descriptors) or fix the term's name")
        if len(found) > 1:
            raise InvalidInputError(f"term {key!r} matches {len(found)} descriptors (sources: "
                                    f"{', '.join(d.provenance.source for d in found)}); name one as TASK@SOURCE")
        chosen.append((c, found[0]))
    return chosen


__all__ = ["as_terms", "select_terms"]
