"""Moving a task vector to another model of the same architecture (method.md §1.7): GradFix and Theseus.

Plain weight-space transport adds the source's tau_A to the target, theta_B + tau_A (`TaskVector.apply_to`).
The two baselines of the paper's same-architecture table change tau_A first:

GradFix (Rinaldi et al. 2026, ICLR, arXiv 2510.09658) needs a few labelled target images. With g the
gradient of the target's classification loss at theta_B (cross-entropy of s * normalise(z(x)) G^T against
its own frozen prompt head G, s the target's own logit scale), keep the entries of tau_A whose sign is
the sign of the descent direction -g:

    theta_B + alpha (m * tau_A),    m = [sign(tau_A) == sign(-g)]

with sign(-g) the per-image majority vote (sum over images of sign(-g_i); the reference code's
`sign_mode max`) or, `vote="mean"`, the sign of the mean gradient. Entries with a zero vote are dropped.

Theseus (Rinaldi et al. 2026, arXiv 2602.12952) is training-free: run the source's and the target's
pre-trained towers on the same unlabelled inputs, and for every module with parameters take its input
rows X and output rows Y (tokens and spatial positions are rows, features the last axis; a 4-D
activation is read channels-last). Per side, the orthogonal Procrustes map between the two models'
rows, T = U V^T with U S V^T = SVD(A_s^T A_t) (A_s T is the closest rotation of A_s to A_t; rows not
centred, as in the authors' code), and each update moves as its layer's function does:

    linear weight (out, in):        dW_t = T_out^T dW_s T_in
    a bias or a norm's scale/shift: db_t = T_out^T db_s
    a parameter used as x @ P:      dP_t = T_in^T dP_s T_out     (T_in: the output of the last submodule to
                                                                  run before it with P's input width)

Updates of other forms (convolution kernels, class and position embeddings, fused q/k/v projections) are
set to zero, as the authors' code does for the patch convolution and the embeddings; `TheseusMaps.transport`
reports which, and the share of ||tau||^2 they held. Settings we chose: the calibration inputs are the
caller's (the experiments give each task's unlabelled probes, the closed form's inputs); one map per
module and side (the authors' `param` granularity); no whitening.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from .errors import InvalidInputError
from .models import DualEncoder
from .task_vector import TaskVector

VOTES = ("majority", "mean")


def gradient_signs(model: DualEncoder, inputs: torch.Tensor, labels: torch.Tensor, prompts, names=None,
                   vote: str = "majority", logit_scale: float | None = None, batch_size: int = 32) -> dict[str, torch.Tensor]:
    """sign(-g) per parameter of `model.module` in `names` (default: every tower parameter), g the gradient
    of the cross-entropy at the pre-trained weights; "majority": sign of the sum of per-image signs.

    inputs (n, ...) canonical, labels (n,) indexing `prompts`; logit_scale: s of the logits (None: the
    model's own learned scale, 100 for a model without one)."""
    if vote not in VOTES:
        raise InvalidInputError(f"GradFix's vote is one of {', '.join(VOTES)}; got {vote!r}")
    if len(inputs) != len(labels) or len(inputs) == 0:
        raise InvalidInputError(f"GradFix needs labelled images (got {len(inputs)} inputs, {len(labels)} labels)")
    work = model.copy_for_new_weights()
    tower_params = {id(p) for p in work.tower.parameters()}
    params = {k: p for k, p in work.module.named_parameters()
              if (k in names if names is not None else id(p) in tower_params) and p.is_floating_point()}
    for p in work.module.parameters():
        p.requires_grad_(False)
    for p in params.values():
        p.requires_grad_(True)
    head = F.normalize(work.encode_texts(list(prompts)).float(), dim=1)
    scale = logit_scale if logit_scale is not None else _own_scale(model)
    votes = {k: torch.zeros_like(p, dtype=torch.float32) for k, p in params.items()}
    work.tower.eval()
    step = 1 if vote == "majority" else batch_size
    for start in range(0, len(inputs), step):
        x, y = inputs[start : start + step], labels[start : start + step]
        logits = scale * F.normalize(work._forward_tower(work.prepare_probes(x)).float(), dim=1) @ head.T
        loss = F.cross_entropy(logits, y.to(logits.device), reduction="sum")
        grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
        for (k, _), g in zip(params.items(), grads):
            if g is not None:
                votes[k] += torch.sign(-g.float()) if vote == "majority" else -g.float()
    return {k: torch.sign(v) for k, v in votes.items()}


def _own_scale(model: DualEncoder) -> float:
    try:
        return model.logit_scale
    except InvalidInputError:
        return 100.0


def gradfix_mask(tau: TaskVector, signs: Mapping[str, torch.Tensor]) -> TaskVector:
    """m * tau: the entries of tau whose sign is the descent sign (a parameter without signs is kept whole,
    as in the authors' code)."""
    out = {}
    for k, v in tau.deltas.items():
        s = signs.get(k)
        out[k] = v if s is None else torch.where(torch.sign(v) == s.to(v.device, v.dtype), v, torch.zeros_like(v))
    return TaskVector(out)


def procrustes(source_rows: torch.Tensor | None, target_rows: torch.Tensor | None, cross: torch.Tensor | None = None) -> torch.Tensor:
    """argmin over orthogonal T of ||A_s T - A_t||_F = U V^T, with U S V^T = SVD(A_s^T A_t) (or of `cross`, A_s^T A_t given)."""
    if cross is None:
        cross = source_rows.double().T @ target_rows.double()
    u, _, vh = torch.linalg.svd(cross.double(), full_matrices=False)
    return u @ vh


def _rows(x) -> torch.Tensor | None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.ndim == 0:
        return None
    if x.ndim == 4:
        x = x.permute(0, 2, 3, 1)
    return x.reshape(-1, x.shape[-1]).double()


class TheseusMaps:
    """The Procrustes maps of every module of `target` against the same module of `source` (module docstring).

    inputs: canonical inputs both models read (e.g. a task's probes). `transport(tau)` moves a task vector
    of `source` (names of `source.module`) to `target`.
    """

    def __init__(self, source: DualEncoder, target: DualEncoder, inputs: torch.Tensor, batch_size: int = 64):
        if len(inputs) == 0:
            raise InvalidInputError("Theseus needs calibration inputs")
        self.target_state = dict(target.module.state_dict())
        self.order: list[str] = []
        cross: dict[tuple[str, str], torch.Tensor] = {}
        for start in range(0, len(inputs), batch_size):
            batch = inputs[start : start + batch_size]
            acts = [self._activations(m, batch) for m in (source, target)]
            for key in acts[1]:
                if key in acts[0] and acts[0][key].shape[0] == acts[1][key].shape[0]:
                    c = acts[0][key].T @ acts[1][key]
                    cross[key] = cross[key] + c if key in cross else c
        self.maps = {key: procrustes(None, None, c) for key, c in cross.items()}
        self.modules = dict(target.module.named_modules())

    def _activations(self, model: DualEncoder, batch: torch.Tensor) -> dict[tuple[str, str], torch.Tensor]:
        acts: dict[tuple[str, str], torch.Tensor] = {}
        handles = []
        record_order = not self.order

        def hook(name):
            def fn(_module, args, output):
                for side, value in (("in", args[0] if args else None), ("out", output)):
                    rows = _rows(value)
                    if rows is not None:
                        acts[(name, side)] = torch.cat([acts[(name, side)], rows]) if (name, side) in acts else rows
                if record_order and name not in self.order:
                    self.order.append(name)
            return fn

        for name, module in model.module.named_modules():
            if any(True for _ in module.parameters(recurse=False)):
                handles.append(module.register_forward_hook(hook(name)))
        try:
            with torch.no_grad():
                was = model.tower.training
                model.tower.eval()
                model._forward_tower(model.prepare_probes(batch))
                model.tower.train(was)
        finally:
            for h in handles:
                h.remove()
        return acts

    def _map(self, module: str, side: str, width: int) -> torch.Tensor | None:
        t = self.maps.get((module, side))
        return t if t is not None and t.shape[0] == width else None

    def _input_map(self, module: str, width: int) -> torch.Tensor | None:
        """For x @ P on `module`: the output map of the last submodule of `module` to run with P's input width."""
        prefix = f"{module}." if module else ""
        for name in reversed(self.order):
            if name.startswith(prefix) and name != module:
                t = self._map(name, "out", width)
                if t is not None:
                    return t
        return None

    def _moved(self, name: str, d: torch.Tensor) -> torch.Tensor | None:
        module, _, local = name.rpartition(".")
        owner = self.modules.get(module)
        if owner is None or self.target_state.get(name) is None or self.target_state[name].shape != d.shape:
            return None
        dd = d.double()
        if d.ndim == 1:
            t_out = self._map(module, "out", d.shape[0])
            return None if t_out is None else t_out.T @ dd
        if d.ndim != 2:
            return None
        if isinstance(owner, nn.Linear) and local == "weight":
            t_in, t_out = self._map(module, "in", d.shape[1]), self._map(module, "out", d.shape[0])
            return None if t_in is None or t_out is None else t_out.T @ dd @ t_in
        if isinstance(owner, nn.MultiheadAttention):
            return None  # fused q/k/v: no activation of its own output
        t_in, t_out = self._input_map(module, d.shape[0]), self._map(module, "out", d.shape[1])
        return None if t_in is None or t_out is None else t_in.T @ dd @ t_out

    def transport(self, tau: TaskVector) -> tuple[TaskVector, dict]:
        """(tau moved to the target, {"zeroed": [names], "zeroed_share": share of ||tau||^2 set to zero})."""
        out, zeroed, lost = {}, [], 0.0
        total = sum(float((v.double() ** 2).sum()) for v in tau.deltas.values())
        for k, v in tau.deltas.items():
            moved = self._moved(k, v)
            if moved is None:
                zeroed.append(k)
                lost += float((v.double() ** 2).sum())
                out[k] = torch.zeros_like(v)
            else:
                out[k] = moved.to(v.dtype)
        return TaskVector(out), {"zeroed": zeroed, "zeroed_share": lost / total if total else 0.0}
