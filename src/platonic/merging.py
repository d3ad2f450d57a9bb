"""Merge rules for task vectors (method.md §2): how n task vectors tau_1..tau_n of one architecture become
the one vector tau_m that theta_0 + alpha * tau_m adds. Pure functions on {name: tensor} dicts.

- "sum": task arithmetic, tau_m = sum_t tau_t (Ilharco et al. 2023, arXiv 2212.04089).
- "ties": TIES-merging (Yadav et al. 2023, arXiv 2306.01708): trim each tau_t to its `density` largest
  magnitudes (over the whole vector, as the paper's code and FusionBench flatten it; entries tied with
  the threshold are kept), elect a sign per entry, sign(sum_t trimmed_t) (a zero sum takes the sign of
  the sum of all entries), and take the disjoint mean: per entry, the mean of the trimmed values whose
  sign is the elected one (0 where none).
- "dare": DARE (Yu et al. 2024, arXiv 2311.03099) then task arithmetic: each entry of tau_t is dropped
  with probability p and the survivors are rescaled by 1 / (1 - p), independently per task vector
  (seed + t: the same draw every time), then summed.
- "iso_c": isotropic merging, ISO-C (Marczak et al. 2025, arXiv 2502.04959): per 2-D parameter, the sum
  M = sum_t tau_t = U S V^T is replaced by mean(S) U V^T (a flat spectrum); other parameters are summed.
- "tsv_m": Task Singular Vectors merging, TSV-M (Gargiulo et al. 2025, CVPR, arXiv 2412.00081): per 2-D
  parameter, each tau_t's top r = max(1, floor(min(m, n) / n_tasks)) singular triplets, stacked as
  U = [U_1 .. U_n] (m x nr), S, V = [V_1 .. V_n] (n x nr); U and V are replaced by their nearest
  orthonormal matrices (the polar factors P Q^T of U = P Sigma Q^T), and tau_m = U_perp diag(S) V_perp^T;
  other parameters are averaged.

Settings chosen here (the papers tune them on validation; we do not): TIES density 0.2 (the paper's and
FusionBench's 20 %), disjoint *mean* (the paper's); DARE p = 0.5 (FusionBench's default for CLIP) over
every parameter, seed 0. Each rule returns tensors in the dtype of the first vector's; the work is in float32
(float64 for float64 vectors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from .errors import InvalidInputError

Deltas = Mapping[str, torch.Tensor]

TIES_DENSITY = 0.2
DARE_P = 0.5
DARE_SEED = 0


def _work_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _checked(deltas: Sequence[Deltas]) -> list[Deltas]:
    deltas = list(deltas)
    if not deltas:
        raise InvalidInputError("merging needs at least one task vector")
    names = set(deltas[0])
    for d in deltas[1:]:
        if set(d) != names:
            diff = sorted(names ^ set(d))
            raise InvalidInputError(f"task vectors of different architectures (e.g. {diff[:3]}) cannot be merged")
    return deltas


def sum_merge(deltas: Sequence[Deltas]) -> dict[str, torch.Tensor]:
    """tau_m = sum_t tau_t (task arithmetic)."""
    deltas = _checked(deltas)
    return {k: sum(d[k].to(_work_dtype(v)) for d in deltas).to(v.dtype) for k, v in deltas[0].items()}


def trim(delta: Deltas, density: float = TIES_DENSITY) -> dict[str, torch.Tensor]:
    """TIES' trim: keep the entries whose magnitude is at least the k-th largest over the whole vector
    (k = density x size, at least 1), zero the rest."""
    if not 0 < density <= 1:
        raise InvalidInputError(f"TIES keeps a fraction of each task vector: density must be in (0, 1]; got {density}")
    flat = torch.cat([v.detach().reshape(-1).to(_work_dtype(v)).abs() for v in delta.values()])
    keep = max(1, int(flat.numel() * density))
    threshold = torch.kthvalue(flat, flat.numel() - keep + 1).values if keep < flat.numel() else flat.min()
    return {k: torch.where(v.abs().to(threshold.dtype) >= threshold, v, torch.zeros_like(v)) for k, v in delta.items()}


def ties_merge(deltas: Sequence[Deltas], density: float = TIES_DENSITY) -> dict[str, torch.Tensor]:
    """TIES-merging: trim, elect sign, disjoint mean (module docstring)."""
    deltas = _checked(deltas)
    trimmed = [trim(d, density) for d in deltas]
    dtype = _work_dtype(next(iter(deltas[0].values())))
    total = sum(float(v.to(dtype).sum()) for t in trimmed for v in t.values())
    majority = 1.0 if total >= 0 else -1.0
    out = {}
    for k, ref in deltas[0].items():
        stack = torch.stack([t[k].to(dtype) for t in trimmed])
        sign = torch.sign(stack.sum(0))
        sign[sign == 0] = majority
        agree = torch.where(sign > 0, stack > 0, stack < 0)
        chosen = stack * agree
        out[k] = (chosen.sum(0) / agree.sum(0).clamp(min=1)).to(ref.dtype)
    return out


def drop_and_rescale(delta: Deltas, p: float = DARE_P, seed: int = DARE_SEED) -> dict[str, torch.Tensor]:
    """DARE on one task vector: each entry kept where u >= p (u ~ U[0, 1) from one generator seeded with
    `seed`, drawn parameter by parameter in name order), the kept ones times 1 / (1 - p)."""
    if not 0 <= p < 1:
        raise InvalidInputError(f"DARE's drop rate p must be in [0, 1); got {p}")
    g = torch.Generator().manual_seed(int(seed))
    out = {}
    for k in sorted(delta):
        v = delta[k]
        u = torch.rand(v.shape, generator=g)
        out[k] = torch.where(u >= p, v.to(_work_dtype(v)) / (1 - p), torch.zeros((), dtype=_work_dtype(v))).to(v.dtype)
    return {k: out[k] for k in delta}


def dare_merge(deltas: Sequence[Deltas], p: float = DARE_P, seed: int = DARE_SEED) -> dict[str, torch.Tensor]:
    """DARE then task arithmetic: sum_t drop_and_rescale(tau_t, p, seed + t)."""
    deltas = _checked(deltas)
    return sum_merge([drop_and_rescale(d, p, seed + t) for t, d in enumerate(deltas)])


def iso_c_merge(deltas: Sequence[Deltas]) -> dict[str, torch.Tensor]:
    """ISO-C: per 2-D parameter, M = sum_t tau_t = U S V^T -> mean(S) U V^T; other parameters summed."""
    summed = sum_merge(deltas)
    out = {}
    for k, m in summed.items():
        if m.ndim != 2:
            out[k] = m
            continue
        u, s, vh = torch.linalg.svd(m.to(torch.float64), full_matrices=False)
        out[k] = (s.mean() * u @ vh).to(m.dtype)
    return out


def _polar(a: torch.Tensor) -> torch.Tensor:
    p, _, qh = torch.linalg.svd(a, full_matrices=False)
    return p @ qh


def tsv_merge(deltas: Sequence[Deltas]) -> dict[str, torch.Tensor]:
    """TSV-M: per matrix, the tasks' top singular vectors stacked and decorrelated (module docstring)."""
    deltas = _checked(deltas)
    n = len(deltas)
    out = {}
    for k, ref in deltas[0].items():
        if ref.ndim != 2:
            out[k] = (sum(d[k].to(_work_dtype(ref)) for d in deltas) / n).to(ref.dtype)
            continue
        r = max(1, min(ref.shape) // n)
        us, ss, vs = [], [], []
        for d in deltas:
            u, s, vh = torch.linalg.svd(d[k].to(torch.float64), full_matrices=False)
            us.append(u[:, :r])
            ss.append(s[:r])
            vs.append(vh[:r].T)
        u_perp, v_perp = _polar(torch.cat(us, 1)), _polar(torch.cat(vs, 1))
        out[k] = (u_perp @ torch.diag(torch.cat(ss)) @ v_perp.T).to(ref.dtype)
    return out


@dataclass(frozen=True)
class MergeRule:
    """One merge rule: its function of a list of {name: tensor} dicts, its label and its paper."""

    name: str
    merge: Callable[[Sequence[Deltas]], dict]
    label: str
    paper: str


MERGE_RULES: dict[str, MergeRule] = {r.name: r for r in (
    MergeRule("sum", sum_merge, "sum", "task arithmetic, Ilharco et al. 2023, arXiv 2212.04089"),
    MergeRule("ties", ties_merge, "TIES", f"TIES-merging, Yadav et al. 2023, arXiv 2306.01708 (density {TIES_DENSITY:g}, "
              "disjoint mean)"),
    MergeRule("dare", dare_merge, "DARE", f"DARE, Yu et al. 2024, arXiv 2311.03099 (p {DARE_P:g}, seed {DARE_SEED}), then the sum"),
    MergeRule("iso_c", iso_c_merge, "ISO-C", "isotropic merging ISO-C, Marczak et al. 2025, arXiv 2502.04959"),
    MergeRule("tsv_m", tsv_merge, "TSV-M", "Task Singular Vectors merging TSV-M, Gargiulo et al. 2025, CVPR, arXiv 2412.00081"),
)}


def merge_rule(name: str) -> MergeRule:
    """The registered rule `name`, or an error naming the rules there are."""
    if name not in MERGE_RULES:
        raise InvalidInputError(f"unknown merge rule {name!r}; choose from {', '.join(MERGE_RULES)}")
    return MERGE_RULES[name]
