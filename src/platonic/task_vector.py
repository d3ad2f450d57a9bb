"""Weight-space task arithmetic (method.md §2): task vectors tau = theta_ft - theta_0 and their algebra.

    theta_MT = theta_0 + sum_t alpha * tau_t          (addition; one alpha for all tasks)
    theta    = theta_0 - alpha * tau_t                (negation)

A `TaskVector` maps parameter names to tensors. Vectors of one architecture (same names and shapes)
add, subtract, negate and scale; `sum()` works, and `TaskVector.merge(vectors)` sums many into one
buffer, or merges them by another rule of `platonic.merging` (`rule="ties" | "dare" | "iso_c" | "tsv_m"`). Deltas keep the checkpoint's dtype (a float32 model's vector is float32); `add_to_` adds in
place, in the parameter's dtype, so merging n vectors of a tower costs one tower-sized buffer, not n
float64 copies. `apply_to(model, alpha)` returns an edited copy.
Weight-space *transport* (adding one model's vector to another model of the same architecture but
other pre-training, theta_B + tau_A) is the same `apply_to` on the other model; names and shapes must match.
"""

from __future__ import annotations

import copy
from typing import Mapping

import torch
from torch import nn

from ._checks import as_finite_scalar
from .errors import InvalidInputError
from .merging import merge_rule
from .storage import write_tensors


class TaskVector:
    """tau (name -> tensor); float tensors only (integer buffers are not task-specific)."""

    __slots__ = ("deltas",)

    def __init__(self, deltas: Mapping[str, torch.Tensor]):
        if not deltas:
            raise InvalidInputError("a task vector needs at least one parameter")
        self.deltas = {k: v.detach() for k, v in deltas.items()}

    @classmethod
    def from_models(cls, pretrained: nn.Module, finetuned: nn.Module) -> "TaskVector":
        """tau = theta_ft - theta_0 over the floating parameters and buffers both modules hold, in their dtype."""
        pre, ft = pretrained.state_dict(), finetuned.state_dict()
        missing = sorted(set(pre) ^ set(ft))
        if missing:
            raise InvalidInputError(f"the two models differ in parameters (e.g. {missing[:3]}); a task vector needs one architecture")
        bad = sorted(k for k in pre if pre[k].is_floating_point() and ft[k].dtype != pre[k].dtype)
        if bad:
            raise InvalidInputError(f"parameter {bad[0]!r} is {pre[bad[0]].dtype} in the pre-trained model but "
                                    f"{ft[bad[0]].dtype} in the fine-tune; load both in one dtype")
        return cls({k: ft[k].detach() - pre[k].detach() for k in pre if pre[k].is_floating_point()})

    @classmethod
    def merge(cls, vectors, coefficients=None, rule: str = "sum", **settings) -> "TaskVector":
        """sum_i c_i tau_i (c_i = 1 by default), accumulated in one buffer per parameter (in its dtype).

        rule: a merge rule of `platonic.merging.MERGE_RULES` ("sum"; "ties", "dare", "iso_c", "tsv_m" merge the
        vectors c_i tau_i by their paper's rule, with `settings` passed on, e.g. density=0.2 or p=0.5).
        """
        vectors = list(vectors)
        coefficients = cls._coefficients(vectors, coefficients)
        for other in vectors[1:]:
            vectors[0]._check_same(other)
        if rule != "sum":
            merge = merge_rule(rule).merge
            return cls(merge([(c * tau).deltas if c != 1 else tau.deltas for c, tau in zip(coefficients, vectors)], **settings))
        if settings:
            raise InvalidInputError(f"the sum takes no settings; got {', '.join(settings)}")
        out = {k: coefficients[0] * v for k, v in vectors[0].deltas.items()}
        for c, tau in zip(coefficients[1:], vectors[1:]):
            for k, acc in out.items():
                acc.add_(tau.deltas[k].to(acc.dtype), alpha=c)
        return cls(out)

    @staticmethod
    def _coefficients(vectors: list, coefficients) -> list[float]:
        if not vectors:
            raise InvalidInputError("merging needs at least one task vector")
        coefficients = [1.0] * len(vectors) if coefficients is None else [as_finite_scalar("coefficient", c) for c in coefficients]
        if len(coefficients) != len(vectors):
            raise InvalidInputError(f"{len(vectors)} task vectors but {len(coefficients)} coefficients")
        return coefficients

    def _check_same(self, other: "TaskVector") -> None:
        if set(self.deltas) != set(other.deltas):
            diff = sorted(set(self.deltas) ^ set(other.deltas))
            raise InvalidInputError(f"task vectors of different architectures (e.g. {diff[:3]}) cannot be combined")

    def __add__(self, other):
        if not isinstance(other, TaskVector):
            return NotImplemented
        self._check_same(other)
        return TaskVector({k: v + other.deltas[k].to(v.dtype) for k, v in self.deltas.items()})

    def __radd__(self, other):
        if isinstance(other, (int, float)) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    def __sub__(self, other):
        if not isinstance(other, TaskVector):
            return NotImplemented
        return self + (-other)

    def __neg__(self) -> "TaskVector":
        return self * -1.0

    def __mul__(self, scalar):
        if isinstance(scalar, bool) or not isinstance(scalar, (int, float, torch.Tensor)):
            return NotImplemented
        c = as_finite_scalar("task vector coefficient", scalar)
        return TaskVector({k: c * v for k, v in self.deltas.items()})

    __rmul__ = __mul__

    def norm(self) -> float:
        return float(torch.sqrt(sum((v.double() ** 2).sum() for v in self.deltas.values())))

    def cosine(self, other: "TaskVector") -> float:
        self._check_same(other)
        dot = sum((v.double() * other.deltas[k].double()).sum() for k, v in self.deltas.items())
        denom = self.norm() * other.norm()
        if denom == 0:
            raise InvalidInputError("cosine with a zero task vector is undefined")
        return float(dot) / denom

    def apply_to(self, model: nn.Module, alpha: float = 1.0) -> nn.Module:
        """A copy of `model` with theta + alpha * tau (names and shapes must match)."""
        out = copy.deepcopy(model)
        self.add_to_(out, alpha)
        return out

    def add_to_(self, model: nn.Module, alpha: float = 1.0) -> None:
        """theta <- theta + alpha * tau, in place."""
        alpha = as_finite_scalar("alpha", alpha)
        state = model.state_dict()
        for k, v in self.deltas.items():
            if k not in state:
                raise InvalidInputError(f"the model has no parameter {k!r}; the task vector is of another architecture")
            if state[k].shape != v.shape:
                raise InvalidInputError(f"parameter {k!r} is {tuple(state[k].shape)} in the model but {tuple(v.shape)} in the task vector")
            with torch.no_grad():
                state[k].add_(v.to(state[k].dtype), alpha=alpha)

    def save(self, path) -> None:
        write_tensors(path, self.deltas, {"kind": "task_vector"}, key="platonic")

    @classmethod
    def load(cls, path) -> "TaskVector":
        from safetensors.torch import load_file

        return cls(load_file(str(path)))
