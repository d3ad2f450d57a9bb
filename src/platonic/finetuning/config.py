"""`FinetuneConfig`: the settings of one fine-tune, and the gradient-ascent baseline's budget.

Kept apart from the training loop (`platonic.finetuning.training`) and free of torch, so that the
command line validates a fine-tune's options (a seed, a learning rate, a length) before it loads
anything heavy.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import InvalidInputError

MODES = ("lora", "full", "attention")  # what `platonic finetune` writes (mode "linear" is the library's)
MAX_SEED = 2**63 - 2  # torch's generators take 64-bit seeds; the replay draw uses seed + 1
MAX_STEPS = 10_000_000  # a length beyond it is a typo (--epochs 1e12), not a fine-tune that could finish
DEFAULT_STEPS = 200


class FinetuneConfig(BaseModel):
    """Settings of one fine-tune (defaults: the task_vectors recipe, scaled down)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["full", "attention", "lora", "linear"] = "full"
    steps: int | None = Field(None, ge=1, le=MAX_STEPS)  # optimiser steps; None: DEFAULT_STEPS, or the length `epochs` gives
    epochs: float | None = Field(None, gt=0)  # instead of steps: ceil(epochs * n / batch_size) for n train items
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-4, gt=0)
    schedule: Literal["cosine", "constant"] = "cosine"  # after the warm-up: cosine decay to 0, or constant lr
    weight_decay: float = Field(0.1, ge=0)
    warmup_steps: int = Field(0, ge=0)
    warmup_fraction: float = Field(0.0, ge=0, lt=1)  # warm-up as a fraction of the steps (at least one step)
    grad_clip: float | None = 1.0
    logit_scale: float | None = Field(100.0, gt=0)  # None: the model's own learned scale
    lora_rank: int = Field(4, ge=1)
    lora_alpha: float = Field(8.0, gt=0)
    lora_targets: Literal["model", "attention"] = "model"  # "attention": LoRA-ATT on q, k, v and out
    orthoreg: float = Field(0.0, ge=0)
    replay: float = Field(0.0, ge=0)  # rho, weight of the replay term (needs `replay_inputs`)
    replay_batch_size: int = Field(32, ge=1)
    ascent: bool = False
    seed: int = Field(0, ge=0, le=MAX_SEED)

    @model_validator(mode="after")
    def _one_length_one_warmup(self) -> "FinetuneConfig":
        if self.warmup_steps and self.warmup_fraction:
            raise InvalidInputError("give warmup_steps or warmup_fraction, not both")
        if self.epochs is not None and self.steps is not None:
            raise InvalidInputError("give steps or epochs, not both")
        return self

    def total_steps(self, n: int | None = None) -> int:
        """Optimiser steps on a train split of n items: `steps` (default DEFAULT_STEPS), or
        ceil(epochs * n / batch_size)."""
        if self.epochs is None:
            return DEFAULT_STEPS if self.steps is None else self.steps
        if n is None:
            raise InvalidInputError("a fine-tune of `epochs` needs the size of its train split to know its length")
        steps = max(1, math.ceil(self.epochs * n / self.batch_size))
        if steps > MAX_STEPS:
            raise InvalidInputError(f"epochs = {self.epochs:g} over {n} train items at batch {self.batch_size} is "
                                    f"{steps:.3g} steps, more than {MAX_STEPS:,}; lower --epochs (epochs=)")
        return steps

    def warmup(self, steps: int | None = None) -> int:
        """Warm-up length of a run of `steps` (default `total_steps()`): `warmup_steps`, or
        max(1, int(steps * warmup_fraction))."""
        if self.warmup_fraction:
            return max(1, int((self.total_steps() if steps is None else steps) * self.warmup_fraction))
        return self.warmup_steps

    def lr_factor(self, step: int, steps: int) -> float:
        """The lr multiplier of `step` (0-based) in a run of `steps`: linear warm-up (step + 1) / w over the
        first w = warmup(steps) steps, then 0.5 (1 + cos(pi (step - w) / max(1, steps - w))) ("cosine") or 1."""
        warmup = self.warmup(steps)
        if step < warmup:
            return (step + 1) / warmup
        if self.schedule == "constant":
            return 1.0
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.5 * (1 + math.cos(math.pi * progress))


# The gradient-ascent negation baseline (method.md §1.7): a short labelled run, loss negated, one
# fixed budget for every experiment setup (the embedded world and YAML setups alike).
GRADIENT_ASCENT = FinetuneConfig(mode="full", steps=20, batch_size=64, lr=5e-4, weight_decay=0.0, ascent=True, seed=0)
