"""`AdaptConfig`: the settings of one fit of the adapter route (`platonic.adapt`, method.md §1.6).

Kept apart from the fit (`platonic.adapter`) and free of torch, so that the command line, a recipe and
the experiments refuse a bad setting (a rank of 0, a negative learning rate) before anything loads.
"""

from __future__ import annotations

import math
from typing import Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InvalidInputError


class AdaptConfig(BaseModel):
    """Settings of one adapter fit (defaults: the paper's code, method.md §1.6)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: int = Field(16, ge=1)
    lora_alpha: float = Field(32.0, gt=0)
    lr: float = Field(3e-4, gt=0)
    weight_decay: float = Field(1e-4, ge=0)
    batch_size: int = Field(64, ge=1)
    epochs: int = Field(20, ge=1)
    max_steps: int = Field(540, ge=0)  # 0: the untrained adapter (exactly zero change)
    warmup_steps: int = Field(0, ge=0)
    target_modules: tuple[str, ...] | None = None  # default: the backend's (attention q / v, else MLP / conv)
    holdout: float = Field(0.0, ge=0.0, lt=1.0)  # fraction of each term's probes held out to pick the step
    eval_every: int = Field(20, ge=1)  # steps between held-out evaluations (with holdout > 0)
    precision: Literal["auto", "bf16", "fp16", "fp32"] = "auto"  # auto: the active --dtype, else bf16 on CUDA
    anchor_weight: float = Field(0.0, ge=0)  # beyond the paper: keep the embeddings of unlabeled anchors (adapt(anchors=))
    seed: int = 0

    def steps_for(self, n_fit: int) -> int:
        """min(max_steps, epochs * ceil(n_fit / batch_size))."""
        return min(self.max_steps, self.epochs * math.ceil(n_fit / self.batch_size))


def adapt_config_from(options: Mapping | None) -> AdaptConfig:
    """AdaptConfig from a mapping, with pydantic's errors turned into one line naming the field."""
    try:
        return AdaptConfig(**dict(options or {}))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidInputError(f"adapter setting {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
