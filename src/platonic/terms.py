"""Signed compositions written as text: "eurosat:+1,dtd:-1" (the CLI's --terms, a recipe's `terms:`).

    >>> parse_terms("eurosat:+1,dtd:-0.5")
    {'eurosat': 1.0, 'dtd': -0.5}
    >>> default_alpha({"dtd": -1.0})
    1.0
"""

from __future__ import annotations

from .errors import InvalidInputError


def parse_terms(text: str, what: str = "--terms") -> dict[str, float]:
    """ "eurosat:+1,dtd:-0.5" -> {"eurosat": 1.0, "dtd": -0.5}; a key may be "task@source".

    A task named twice ("shapes:+1,shapes:-1") is refused: give it once, with the summed coefficient; a
    coefficient of 0 is refused too (an export would list an edit it does not hold).
    `what` names the field in errors (the CLI's --terms, a recipe's edits.N.terms).
    """
    terms: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.rpartition(":")
        key = key.strip()
        if not sep or not key:
            raise InvalidInputError(f"term {part!r} is not TASK:COEFFICIENT (e.g. eurosat:+1)")
        try:
            coefficient = float(value)
        except ValueError:
            raise InvalidInputError(f"term {part!r}: coefficient {value!r} is not a number") from None
        if coefficient != coefficient or coefficient in (float("inf"), float("-inf")):
            raise InvalidInputError(f"term {part!r}: the coefficient must be a finite number")
        if coefficient == 0:
            raise InvalidInputError(f"term {part!r} in {what}: a coefficient of 0 is no edit; drop the term or give it "
                                    f"a weight, e.g. {key}:+1")
        if key in terms:
            raise InvalidInputError(f"term {key!r} is given twice in {what}; give it once, with the summed coefficient "
                                    f"(e.g. {key}:{terms[key] + coefficient:+g})")
        terms[key] = coefficient
    if not terms:
        raise InvalidInputError(f"{what} is empty; give e.g. 'eurosat:+1,dtd:-1'")
    return terms


def default_alpha(terms: dict[str, float]) -> float:
    """The paper's strengths: 1.0 when every term is negative (negation, c = -1), else 0.5 (addition)."""
    return 1.0 if all(c < 0 for c in terms.values()) else 0.5
