"""Tangent (linearised) towers: the first-order Taylor expansion of a tower around its pre-trained weights.

    f_lin(x; theta_0 + dtheta) = f(x; theta_0) + J_theta f(x; theta_0) dtheta

computed with forward-mode AD, `torch.func.jvp` over `torch.func.functional_call` (tangent task
arithmetic, Ortiz-Jimenez et al. 2023; the "linear" flavour of method.md §2). The output is linear in
dtheta, so a task vector of a linearised fine-tune is dtheta itself, and theta_0 + alpha * sum_t tau_t
of linearised models is the same expansion with dtheta = alpha * sum_t tau_t.

`LinearizedEncoder` is a DualEncoder whose image tower is the expansion (the text tower is unchanged);
it encodes with `encode_probes` like any model (z only: it has no head-affine inputs to capture).
"""

from __future__ import annotations

import hashlib
from typing import Mapping, Sequence

import torch
from torch import nn
from torch.func import functional_call, jvp

from ..errors import InvalidInputError
from ..hashing import update_with_tensor
from ..models import DualEncoder, ProbeEmbeddings


class TowerCall(nn.Module):
    """encoder._forward_tower as a module call, so functional_call can swap `encoder.module`'s parameters."""

    def __init__(self, encoder: DualEncoder):
        super().__init__()
        self.root = encoder.module
        object.__setattr__(self, "_encoder", encoder)  # not a submodule: its parameters are root's

    def forward(self, inputs):
        return self._encoder._forward_tower(inputs)


def linearisable_names(encoder: DualEncoder) -> list[str]:
    """Names (in `encoder.module.named_parameters()`) of the floating parameters a full fine-tune trains:
    the tower's and its edit site's, without an appended identity site (which is not part of the model)."""
    from ..edit import appended_identity_parameters

    appended = {id(p) for p in appended_identity_parameters(encoder.tower)}
    tower = {id(p) for p in encoder.tower.parameters()}
    site = {id(t) for t in encoder.edit_site.tensors().values() if isinstance(t, nn.Parameter)}
    return [n for n, p in encoder.module.named_parameters()
            if (id(p) in tower or id(p) in site) and id(p) not in appended and p.is_floating_point()]


def tangent_forward(encoder: DualEncoder, names: Sequence[str], delta: Sequence[torch.Tensor], inputs) -> torch.Tensor:
    """f(x; theta_0) + J f(x; theta_0) dtheta (B, d) for prepared `inputs`; theta_0 = the encoder's own weights.

    delta[i] is dtheta of parameter names[i] (same shape and dtype). Differentiable in `delta`. Attention
    runs on the math kernel and without nn.MultiheadAttention's inference fast path: the kernels with
    forward-mode derivatives.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    call = TowerCall(encoder)
    params = dict(encoder.module.named_parameters())
    primals = tuple(params[n].detach() for n in names)
    keys = [f"root.{n}" for n in names]

    def f(*weights):
        return functional_call(call, dict(zip(keys, weights)), (inputs,))

    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # nn.MultiheadAttention's inference kernel has no forward AD
    try:
        with sdpa_kernel(SDPBackend.MATH):
            out, change = jvp(f, primals, tuple(delta))
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    return out + change


class LinearizedEncoder(DualEncoder):
    """The linearised model theta_0 + dtheta of a pre-trained `base` (which it shares, unchanged).

    delta: parameter name (of `base.module`) -> dtheta; names it does not hold have dtheta = 0.
    """

    def __init__(self, base: DualEncoder, delta: Mapping[str, torch.Tensor]):
        names = set(linearisable_names(base))
        unknown = sorted(set(delta) - names)
        if unknown:
            raise InvalidInputError(f"{base.spec}: the linearised model has no parameter {unknown[0]!r} among its tower's "
                                    "trainable weights; the task vector is of another model")
        params = dict(base.module.named_parameters())
        for k, v in delta.items():
            if v.shape != params[k].shape:
                raise InvalidInputError(f"parameter {k!r} is {tuple(params[k].shape)} in the model but {tuple(v.shape)} in the delta")
        self.base = base
        self.names = [n for n in linearisable_names(base) if n in delta]
        self.delta = {k: delta[k].detach().to(params[k].dtype) for k in self.names}
        self.spec = f"linearized:{base.spec}"
        self.modality = base.modality
        self.canonical_size = base.canonical_size

    # -- DualEncoder, by delegation ---------------------------------------------------------------
    @property
    def tower(self) -> nn.Module:
        return self.base.tower

    @property
    def module(self) -> nn.Module:
        return self.base.module

    @property
    def edit_site(self):
        return self.base.edit_site

    @property
    def embed_dim(self) -> int:
        return self.base.embed_dim

    @property
    def logit_scale(self) -> float:
        return self.base.logit_scale

    def canonical(self, probes) -> torch.Tensor:
        return self.base.canonical(probes)

    def prepare_probes(self, probes):
        return self.base.prepare_probes(probes)

    def _forward_tower(self, inputs) -> torch.Tensor:
        if not self.names:
            return self.base._forward_tower(inputs)
        return tangent_forward(self.base, self.names, [self.delta[n] for n in self.names], inputs)

    def encode_texts(self, texts):
        return self.base.encode_texts(texts)

    def architecture_id(self) -> str:
        return "linearized/" + self.base.architecture_id()

    @property
    def text_fingerprint(self) -> str:
        return self.base.text_fingerprint  # the tangent update moves the tower only; texts are the base's

    def weights_digest(self) -> str:
        h = hashlib.sha256(self.base.weights_digest().encode())
        for name in self.names:
            update_with_tensor(h, self.delta[name], name)
        return h.hexdigest()

    def save(self, path, provenance: dict | None = None) -> None:
        raise InvalidInputError(f"{self.spec}: a linearised model has no checkpoint format of its own library; save its "
                                "task vector (`TaskVector(model.delta).save(PATH)`) and the pre-trained model instead")

    @torch.no_grad()
    def encode_probes(self, probes: torch.Tensor, batch_size: int = 256, progress: bool = False) -> ProbeEmbeddings:
        """Canonical probes (N, ...) -> ProbeEmbeddings(z (N, d), u=None), batched."""
        was_training = self.tower.training
        self.tower.eval()
        try:
            zs = [self._forward_tower(self.prepare_probes(probes[i : i + batch_size])).float().cpu()
                  for i in range(0, probes.shape[0], batch_size)]
        finally:
            self.tower.train(was_training)
        return ProbeEmbeddings(z=torch.cat(zs), u=None)

    # -- task arithmetic ------------------------------------------------------------------------
    def task_vector(self):
        """tau = dtheta (a `TaskVector`, in the parameters' dtype)."""
        from ..task_vector import TaskVector

        return TaskVector(self.delta)

    def with_delta(self, tau, alpha: float = 1.0) -> "LinearizedEncoder":
        """The linearised model at theta_0 + alpha * tau (tau a TaskVector of this base)."""
        return LinearizedEncoder(self.base, {k: alpha * v for k, v in tau.deltas.items()})
