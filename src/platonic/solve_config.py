"""How the closed form is solved: one `SolveConfig` for the library, the experiments, recipes and the CLI.

The settings of `platonic.solve.RidgeSolver` (method.md §1.2): the relative ridge weights mu_a, mu_b;
"paper" (the paper's solve) or "anchored" (beyond the paper: every solve also penalises the
operator's effect on a pool of unlabeled inputs, with relative weight `anchor_weight`); an optional
rank cap and its truncation. The pool is `anchor_images` (a folder of images, or a .safetensors file
with a 'probes' tensor) where one is named; the experiments otherwise take, for an operator of task
t, the first `anchor_per_task` probes of every *other* task (train images: no test set, no control).

A config is frozen and hashable (a key of the experiments' feature stores). `SolveConfig.parse` refuses
invalid settings with one `InvalidInputError` naming each setting (by the CLI's flags where `flags` maps
them); direct construction raises pydantic's `ValidationError`, as every config of the library does.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import InvalidInputError

DEFAULT_MU_A = 1e-2  # the paper's relative ridge weights (method.md §1.2); `platonic.solve` reads them here
DEFAULT_MU_B = 1e-6
DEFAULT_ANCHOR_WEIGHT = 1.0
MAX_RELATIVE_WEIGHT = 1e6  # beyond it a ridge weight leaves no edit (1e300 was taken silently)

SOLVE_KINDS = ("paper", "anchored")
CLI_FLAGS = {"kind": "--solve", "mu_a": "--mu-a", "mu_b": "--mu-b", "rank": "--rank", "truncation": "--truncation",
             "anchor_weight": "--anchor-weight", "anchor_per_task": "--anchor-per-task", "anchor_images": "--anchor-images"}


class SolveConfig(BaseModel):
    """Settings of the two-sided ridge solve (module docstring); the defaults are the paper's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["paper", "anchored"] = "paper"
    mu_a: float = DEFAULT_MU_A
    mu_b: float = DEFAULT_MU_B
    rank: int | None = Field(None, ge=1)
    truncation: Literal["paper", "optimal"] = "paper"
    anchor_weight: float = DEFAULT_ANCHOR_WEIGHT
    anchor_per_task: int = Field(64, ge=1)
    anchor_images: Path | None = None

    @field_validator("kind", mode="before")
    @classmethod
    def _known_kind(cls, v):
        if v not in SOLVE_KINDS:
            raise InvalidInputError(f"unknown solve {v!r}: solve kind must be one of {', '.join(SOLVE_KINDS)}")
        return v

    @field_validator("mu_a", "mu_b", "anchor_weight")
    @classmethod
    def _finite_positive(cls, v: float) -> float:
        if not (math.isfinite(v) and v > 0):
            raise InvalidInputError(f"must be a finite number > 0 (relative to the data's own scale); got {v}")
        if v > MAX_RELATIVE_WEIGHT:
            raise InvalidInputError(f"must be at most {MAX_RELATIVE_WEIGHT:g} (relative to the data's own scale, where "
                                    f"the paper's are 0.01 and 1e-06); got {v:g}, which leaves no edit")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "SolveConfig":
        if self.kind == "paper" and self.anchor_images is not None:
            raise InvalidInputError("anchor_images is the anchored solve's pool; set kind: anchored (--solve anchored)")
        if self.kind == "anchored" and self.rank is not None and self.truncation != "optimal":
            raise InvalidInputError("a rank-capped anchored solve has no paper truncation; set truncation: optimal")
        return self

    @property
    def anchored(self) -> bool:
        return self.kind == "anchored"

    def solver_settings(self) -> dict:
        """The keyword arguments of `RidgeSolver` these settings give (the pool apart)."""
        return {"mu_a": self.mu_a, "mu_b": self.mu_b, "rank": self.rank, "truncation": self.truncation,
                "anchor_weight": self.anchor_weight}

    @classmethod
    def parse(cls, settings: dict, flags: dict | None = None, where: str = "") -> "SolveConfig":
        """A config from `settings` (None values left at their defaults), or one `InvalidInputError` naming the
        setting as `flags` spells it (e.g. `CLI_FLAGS`; `where` prefixes the field path, e.g. "edits.0.solve.")."""
        given = {k: v for k, v in settings.items() if v is not None}
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            raise InvalidInputError(explain(exc, flags, where)) from None


def explain(exc: ValidationError, flags: dict | None = None, where: str = "") -> str:
    """pydantic's errors as one line: each setting by its flag (or field path) and the problem."""
    parts = []
    for e in exc.errors():
        field = ".".join(str(p) for p in e["loc"])
        name = (flags or {}).get(field, f"{where}{field}" if field else where.rstrip(".") or "solve")
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{name} {msg}" if msg.startswith(("must ", "unknown ")) else f"{name}: {msg}")
    return "; ".join(parts)


def check_pool(config: SolveConfig, has_pool: bool) -> None:
    """Refuse an anchored solve without a pool and a pool the paper's solve would ignore (before any model loads)."""
    if config.anchored and not has_pool:
        raise InvalidInputError("the anchored solve needs a pool of unlabeled inputs: give --anchor-images DIR "
                                "(anchor_images= in the API), images that no test set or control uses")
    if not config.anchored and has_pool:
        raise InvalidInputError("an anchor pool was given but the solve is the paper's, which would ignore it; "
                                "pass --solve anchored (solve='anchored') or drop the pool")
