"""Parts of weight-space task arithmetic (method.md §2) that several experiments share: the fine-tuning
recipe of the cached fine-tunes, OrthoReg's lambda grid check, validation subsets, batched encodes of
evaluation sets, and models theta_0 + alpha * tau evaluated without copying a model per alpha.

Users: `task_arithmetic` (the OrthoReg benchmark), `protocols.weight_space`, `orthoreg_sources`, and
the world's cached sources (`setups.world.world_sources`).
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from pydantic import BaseModel, ConfigDict, Field

from ..._checks import as_finite_scalar
from ...errors import InvalidInputError
from ...finetuning.linearize import LinearizedEncoder
from ...finetuning.training import FinetuneConfig
from ...metrics import top1
from ...task_vector import TaskVector
from .setup import EvalSet


class TaskVectorRecipe(BaseModel):
    """The fine-tune of every (model, task, flavour, lambda): the authors' recipe (AdamW, weight decay 0.1,
    warm-up then cosine, clipping 1.0, frozen prompt head), scaled down. LoRA-ATT: rank 4, alpha 8, its own lr."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: int = Field(64, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-3, gt=0)
    lora_lr: float = Field(1e-2, gt=0)
    weight_decay: float = Field(0.1, ge=0)
    warmup_fraction: float = Field(0.1, ge=0, lt=1)
    logit_scale: float | None = None  # None: each model's own learned scale
    lora_rank: int = Field(4, ge=1)
    lora_alpha: float = Field(8.0, gt=0)
    seed: int = 0

    def config(self, flavour: str, lam: float, task_index: int) -> FinetuneConfig:
        lora = flavour == "lora"
        return FinetuneConfig(mode=flavour, steps=self.steps, batch_size=self.batch_size, lr=self.lora_lr if lora else self.lr,
                              weight_decay=self.weight_decay, warmup_fraction=self.warmup_fraction, logit_scale=self.logit_scale,
                              lora_rank=self.lora_rank, lora_alpha=self.lora_alpha, lora_targets="attention",
                              orthoreg=lam, seed=self.seed * 1000 + task_index)


def check_lambdas(lambdas: Sequence[float]) -> tuple[float, ...]:
    values = tuple(as_finite_scalar("lambda", x) for x in lambdas)
    if not values or any(not 0.1 <= v <= 100 for v in values):
        raise InvalidInputError(f"OrthoReg's lambda grid must be one or more values within [0.1, 100] (method.md §2); "
                                f"got {list(values)}")
    return tuple(sorted(set(values)))


def val_subset(eval_set: EvalSet, size: int | None, seed: int = 0) -> EvalSet:
    """At most `size` items of a validation split (a seeded subset), or the whole split."""
    if size is None or len(eval_set.labels) <= size:
        return eval_set
    idx = torch.randperm(len(eval_set.labels), generator=torch.Generator().manual_seed(seed))[:size].sort().values
    return EvalSet(eval_set.name, eval_set.inputs[idx], eval_set.labels[idx], eval_set.prompts)


class Features:
    """Batched encodes of evaluation sets for one pre-trained model, and accuracies from them.

    Prompt embeddings (the text tower is never trained) are computed once per set.
    """

    def __init__(self, model, batch_size: int = 256):
        self.model, self.batch_size = model, batch_size
        self._heads: dict[str, torch.Tensor] = {}

    def head(self, s: EvalSet) -> torch.Tensor:
        if s.name not in self._heads:
            self._heads[s.name] = self.model.encode_texts(list(s.prompts)).float()
        return self._heads[s.name]

    def encode(self, model, sets: Sequence[EvalSet]) -> dict[str, torch.Tensor]:
        """z (n, d) per set from one pass of `model` over all their inputs (one pass per set where a set is a
        lazily decoded split: those are never decoded whole)."""
        sets = list(sets)
        if not all(isinstance(s.inputs, torch.Tensor) for s in sets):
            return {s.name: model.encode_probes(s.inputs, batch_size=self.batch_size).z.float() for s in sets}
        z = model.encode_probes(torch.cat([s.inputs for s in sets]), batch_size=self.batch_size).z.float()
        out, start = {}, 0
        for s in sets:
            out[s.name] = z[start : start + len(s.labels)]
            start += len(s.labels)
        return out

    def accuracy(self, z: torch.Tensor, s: EvalSet) -> float:
        return top1(z, self.head(s), s.labels)


class Variants:
    """Models theta_0 + alpha * tau of one pre-trained model and flavour, as features of evaluation sets.

    Non-linear flavours: one working copy whose weights are set to theta_0 + alpha * tau in place, then
    encoded. "linear": f_0 + alpha * (f_lin(tau) - f_0), from one tangent pass per tau.
    """

    def __init__(self, features: Features, flavour: str, zero_shot: Callable[[Sequence[EvalSet]], dict]):
        self.f, self.flavour, self.zero_shot = features, flavour, zero_shot
        self._work = None
        self._theta0: dict[str, torch.Tensor] = {}
        self._tangent: dict[tuple[int, str], torch.Tensor] = {}

    def _weights(self, tau: TaskVector, alpha: float):
        if self._work is None:
            self._work = self.f.model.copy_for_new_weights()
        state = self._work.module.state_dict()
        for k in list(self._theta0):  # restore what an earlier tau touched
            state[k].copy_(self._theta0[k])
        for k, v in tau.deltas.items():
            if k not in self._theta0:
                self._theta0[k] = state[k].clone()
            state[k].add_(v.to(state[k].dtype), alpha=alpha)
        self._work.invalidate_fingerprint()
        return self._work

    def features(self, tau: TaskVector, alpha: float, sets: Sequence[EvalSet]) -> dict[str, torch.Tensor]:
        sets = list(sets)
        if alpha == 0:
            return self.zero_shot(sets)
        if self.flavour != "linear":
            return self.f.encode(self._weights(tau, alpha), sets)
        missing = [s for s in sets if (id(tau), s.name) not in self._tangent]
        if missing:
            lin = LinearizedEncoder(self.f.model, tau.deltas)
            z0 = self.zero_shot(missing)
            for name, z in self.f.encode(lin, missing).items():
                self._tangent[(id(tau), name)] = z - z0[name]  # J tau, exactly (the expansion is linear in tau)
        z0 = self.zero_shot(sets)
        return {s.name: z0[s.name] + alpha * self._tangent[(id(tau), s.name)] for s in sets}

    def forget(self) -> None:
        self._tangent.clear()


def aligned(vectors: dict[str, TaskVector]) -> dict[str, TaskVector]:
    """The same parameter names in every vector (a parameter one fine-tune left unchanged is a zero delta)."""
    names: dict[str, torch.Tensor] = {}
    for tau in vectors.values():
        for k, v in tau.deltas.items():
            names.setdefault(k, v)
    return {t: TaskVector({k: tau.deltas.get(k, torch.zeros_like(ref)) for k, ref in names.items()})
            for t, tau in vectors.items()}
