"""Deterministic, disjoint train / val / test assignment of the units a split keeps apart.

A unit is what a test clip must never share with training: a GM program or drum kit, a speaker (an
espeak-ng voice variant family, a flite / festival speaker). Units are ranked by the sha256 of their
name, so the assignment depends on nothing but the names.
"""

from __future__ import annotations

import hashlib

from ...errors import InvalidInputError

SPLITS = ("train", "val", "test")


def rank_split(items, key=str) -> dict[str, list]:
    """items -> {"train", "val", "test"}: sorted by sha256(key(item)), the first quarter (at least one) is
    test, the next eighth (at least one) val, the rest train. Needs at least three items."""
    ranked = sorted(items, key=lambda i: hashlib.sha256(key(i).encode()).hexdigest())
    if len(ranked) < 3:
        raise InvalidInputError(f"a three-way split needs at least 3 units, got {len(ranked)}")
    n_test = max(1, round(len(ranked) / 4))
    n_val = max(1, round(len(ranked) / 8))
    return {"train": ranked[n_test + n_val:], "val": ranked[n_test:n_test + n_val], "test": ranked[:n_test]}
