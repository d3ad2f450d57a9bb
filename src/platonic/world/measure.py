"""Does the world behave like the paper's models? Descriptor agreement and the oracle closed form.

All through platonic's own API: `Descriptor.from_embeddings`, `Operator.solve`, `fold` / `unfold`.

- Same-task cross-model cosine: for task t, the mean over model pairs (i, j) of cos(U_i^t, U_j^t),
  U measured on t's probes and prompts (paper: 0.473 on average).
- Cross-task within-model cosine: for grid t and model i, the mean over other tasks s of
  cos(U_i^{s on grid t}, U_i^t), where U_i^{s on grid t} is what model i's fine-tune on s changed on
  t's probes and prompts (a different skill seen through the same grid). Same-task agreement must be
  clearly above this.
- Oracle: model i's own descriptor of t, solved on i and folded at alpha = 1; recovery =
  (acc_oracle - acc_zero_shot) / (acc_finetuned - acc_zero_shot), summed over tasks per model.
- Cross-model (extra): source j's descriptor solved on target i, folded at alpha = 0.5.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..bank import Operator
from ..descriptor import Descriptor, ProbeGrid, Provenance
from ..edit import HeadAffineSite, embedding_change, fold, unfold
from ..solve import head_design_matrix
from .zoo import WorldModel


@dataclass
class ModelView:
    """One model's cached embeddings on every task grid.

    F_pre[t] (N_t, d) base probe embeddings; U_pre[t] (N_t, p) head inputs (head site only);
    G[t] (M_t, d) normalised prompt embeddings; F_ft[(kind, s)][t] (N_t, d): fine-tune on s, grid t.
    """

    model: WorldModel
    F_pre: dict
    U_pre: dict
    G: dict
    F_ft: dict


def design(view: ModelView, task: str) -> tuple[torch.Tensor, str]:
    """The target's design matrix for a solve on `task`'s grid and the operator form."""
    if isinstance(view.model.edit_site, HeadAffineSite):
        return head_design_matrix(view.U_pre[task].double(), view.F_pre[task].double()), "head_affine"
    return F.normalize(view.F_pre[task].double(), dim=1), "linear"


def descriptor(view: ModelView, kind: str, source_task: str, grid: ProbeGrid, on_task: str | None = None) -> Descriptor:
    on_task = on_task or source_task
    return Descriptor.from_embeddings(
        view.F_pre[on_task].double(), view.F_ft[(kind, source_task)][on_task].double(), view.G[on_task].double(), grid,
        Provenance(source=view.model.spec, finetune=f"{kind} fine-tune on {source_task}"),
    )


def agreement(views: dict[str, ModelView], grids: dict[str, ProbeGrid], kind: str) -> dict:
    """Per task: mean same-task cross-model cosine and mean cross-task within-model cosine."""
    out = {}
    names = list(views)
    for t, grid in grids.items():
        own = {m: descriptor(views[m], kind, t, grid) for m in names}
        same = [own[a].cosine(own[b]) for a, b in itertools.combinations(names, 2)]
        cross = []
        for m in names:
            for s in grids:
                if s != t:
                    cross.append(descriptor(views[m], kind, s, grid, on_task=t).cosine(own[m]))
        out[t] = {"same_task_cross_model": sum(same) / len(same), "cross_task_within_model": sum(cross) / len(cross),
                  "pairs": {f"{a}|{b}": c for (a, b), c in zip(itertools.combinations(names, 2), same)}}
    return out


@torch.no_grad()
def oracle_accuracy(view: ModelView, grid: ProbeGrid, kind: str, task: str, test_images, test_labels, alpha: float = 1.0) -> float:
    """Fold the model's own descriptor's operator at `alpha` (real fold), measure test accuracy, unfold."""
    model = view.model
    X, form = design(view, task)
    op = Operator.solve(X, view.G[task].double(), descriptor(view, kind, task, grid), target=model.fingerprint, form=form)
    record = fold(model.edit_site, op, alpha)
    try:
        z = model.encode_probes(test_images, batch_size=512).z
    finally:
        unfold(record)
    return float(((F.normalize(z, dim=-1) @ view.G[task].T).argmax(1) == test_labels).float().mean())


def transfer_accuracy(target: ModelView, source: ModelView, grid: ProbeGrid, kind: str, task: str,
                      z_test: torch.Tensor, u_test: torch.Tensor | None, test_labels, alpha: float = 0.5) -> float:
    """Source's descriptor solved on target, applied to cached target test embeddings (exactly what fold does)."""
    X, form = design(target, task)
    op = Operator.solve(X, target.G[task].double(), descriptor(source, kind, task, grid), target=target.model.fingerprint, form=form)
    z = z_test.double() + alpha * embedding_change(z_test.double(), None if u_test is None else u_test.double(), op)
    return float(((F.normalize(z, dim=-1) @ target.G[task].double().T).argmax(1) == test_labels).float().mean())
