"""Edit sites: where an operator lands in a model, and folding it in (method.md §1.3).

One small type per form in which the last map onto the embedding space appears. Each knows which
operator form it takes and how to fold and invert it:

| site                   | tower computes                 | operator          | fold                                  |
|------------------------|--------------------------------|-------------------|---------------------------------------|
| `ProjectionParameter`  | z = x @ P, P (w, d)            | linear A (d, d)   | P <- P (I + alpha A)^T                |
| `LinearSite`           | z = W x + b, W (d, w)          | linear A (d, d)   | W <- (I + alpha A) W, b <- (I + alpha A) b |
| `HeadAffineSite`       | z = a + W2 u + b2, W2 (d, p)   | head B (p + 1, d) | W2 <- W2 + alpha dW, b2 <- b2 + alpha db, [dW^T; db^T] = B |
| `AppendedLinearSite`   | z = tower(x), no final linear  | linear A (d, d)   | a d x d Linear (identity) is appended, then as `LinearSite` |

So the projection forms give z -> (I + alpha A) z and the head form z -> z + alpha (dW u + db), exactly:
inference cost, parameter count and architecture are unchanged (the appended layer adds d^2).

Each site also owns the maths of a solve and of an evaluation from cached features: with
`ProbeEmbeddings(z (N, d), u (N, p) or None)` the tower's outputs (and, for a head site, the inputs of
its last affine),

| site                         | `design_matrix(embeddings)`          | `embedding_change(embeddings, delta)` |
|------------------------------|--------------------------------------|---------------------------------------|
| linear forms (three above)   | F = z / ||z|| (N, d)                 | D = z A^T (N, d)                      |
| `HeadAffineSite`             | H = [u; 1] / ||z|| (N, p + 1)        | D = [u; 1] B (N, d)                   |

so that folding `delta` at strength alpha maps z to z + alpha D exactly, and the solve of a descriptor
on the target takes the design matrix in place of F (`platonic.solve`).

`fold` returns a `FoldRecord` holding a copy of the weights it changed; `unfold(record)` restores them
bit-exactly. `unfold_by_inversion(site, operator, alpha)` needs no copy and restores to float rounding
(about 1e-6 relative in float32) by applying the inverse edit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from ._checks import as_finite_scalar
from .bank import Operator
from .errors import EditSiteError
from .solve import head_design_matrix


@dataclass(frozen=True)
class ProbeEmbeddings:
    """Tower outputs for a batch of probes, as an edit site sees them.

    z: (N, d) unnormalised embeddings; u: (N, p) inputs of the edit site's affine when the site is a
    residual-head affine (None otherwise), needed for the design matrix H = [u; 1] / ||z||.
    """

    z: torch.Tensor
    u: torch.Tensor | None = None


def _linear_change(z: torch.Tensor, u: torch.Tensor | None, delta: torch.Tensor) -> torch.Tensor:
    """D = z A^T (N, d) for A (d, d): folding A maps z -> (I + alpha A) z = z + alpha D."""
    return z @ delta.to(device=z.device, dtype=z.dtype).T


def _head_change(z: torch.Tensor, u: torch.Tensor | None, delta: torch.Tensor) -> torch.Tensor:
    """D = [u; 1] B (N, d) for B (p + 1, d): folding B maps z -> z + alpha (dW u + db) = z + alpha D."""
    if u is None:
        raise EditSiteError("a head update needs u, the inputs of the head's last affine")
    delta = delta.to(device=z.device, dtype=z.dtype)
    return torch.cat([u.to(z.dtype), torch.ones(u.shape[0], 1, dtype=z.dtype, device=z.device)], dim=1) @ delta


_CHANGE_BY_FORM = {"linear": _linear_change, "head_affine": _head_change}


class EditSite(ABC):
    """Where an edit lands. Subclasses set `form` ("linear" or "head_affine")."""

    form: ClassVar[str]

    @property
    @abstractmethod
    def out_dim(self) -> int:
        """d, the embedding width the site writes."""

    @abstractmethod
    def tensors(self) -> dict[str, torch.Tensor]:
        """The parameters a fold changes, by name (live references)."""

    @abstractmethod
    def _apply(self, delta: torch.Tensor, alpha: float) -> None:
        """Fold `alpha * delta` (float64) into the parameters, in place."""

    @abstractmethod
    def _invert(self, delta: torch.Tensor, alpha: float) -> None:
        """Undo `_apply(delta, alpha)` without a saved copy."""

    def change_bound(self, delta: torch.Tensor, alpha: float) -> float | None:
        """An upper bound on ||W' - W|| / ||W|| of folding `delta` at `alpha`, from `delta` alone where the form
        allows (None: no bound without folding). Linear forms map W to (I + alpha A) W (or P to P (I + alpha A)^T),
        so the ratio is at most |alpha| ||A||_2 <= |alpha| ||A||_F."""
        if self.form == "linear":
            return abs(alpha) * float(torch.linalg.matrix_norm(delta.double()))
        return None

    def expected_delta_shape(self) -> tuple[int, int]:
        """The operator delta this site takes: A (d, d) for the linear forms."""
        return (self.out_dim, self.out_dim)

    @classmethod
    def at(cls, parent: nn.Module | None, name: str, target) -> "EditSite | None":
        """The site on `target` (attribute `name` of `parent`), or None when it is not of this kind
        (the site rules of `platonic.models.sites` try each rule's site type this way)."""
        return None

    def design_matrix(self, embeddings: ProbeEmbeddings) -> torch.Tensor:
        """F (N, d) = z / ||z||, float64: the target-side matrix a linear-form solve takes.

        embeddings: the site's `ProbeEmbeddings` on a descriptor's N probes (z (N, d)).
        """
        return torch.nn.functional.normalize(embeddings.z.double(), dim=1)

    def embedding_change(self, embeddings: ProbeEmbeddings, delta: torch.Tensor) -> torch.Tensor:
        """D (N, d) such that folding `delta` at strength alpha maps the embeddings z to z + alpha D.

        Linear forms: D = z A^T for A (d, d) (so z -> (I + alpha A) z). In z's dtype and device; this
        is what makes evaluation from cached features exact.
        """
        return _CHANGE_BY_FORM[self.form](embeddings.z, embeddings.u, self._checked_delta(delta))

    def watch_inputs(self, sink: list) -> "torch.utils.hooks.RemovableHandle | None":
        """Start appending what the site's embeddings need besides z (u, for a head site) to `sink`
        on every forward; returns the hook handle to remove, or None when the site needs nothing."""
        return None

    def _checked_delta(self, delta) -> torch.Tensor:
        delta = delta.delta if isinstance(delta, Operator) else delta
        if not isinstance(delta, torch.Tensor) or tuple(delta.shape) != self.expected_delta_shape():
            shape = tuple(delta.shape) if isinstance(delta, torch.Tensor) else type(delta).__name__
            raise EditSiteError(f"{type(self).__name__} takes a delta of shape {self.expected_delta_shape()}; got {shape}")
        return delta

    def check(self, operator: Operator) -> torch.Tensor:
        if not isinstance(operator, Operator):
            raise EditSiteError(f"fold needs an Operator; got {type(operator).__name__}")
        if operator.form != self.form:
            raise EditSiteError(
                f"{type(self).__name__} takes a {self.form!r} operator but got a {operator.form!r} one "
                f"({operator.label}); solve the descriptor for this site's form"
            )
        if tuple(operator.delta.shape) != self.expected_delta_shape():
            raise EditSiteError(
                f"operator {operator.label} has shape {tuple(operator.delta.shape)} but "
                f"{type(self).__name__} needs {self.expected_delta_shape()}; it was solved for another model"
            )
        return operator.delta.detach().to(device="cpu", dtype=torch.float64)

    def describe(self) -> str:
        return f"{type(self).__name__}(d={self.out_dim})"


def _param(module: nn.Module, name: str) -> torch.Tensor:
    value = getattr(module, name, None)
    if not isinstance(value, torch.Tensor):
        raise EditSiteError(f"{type(module).__name__} has no tensor attribute {name!r} to edit")
    return value


@torch.no_grad()
def _assign(param: torch.Tensor, value64: torch.Tensor) -> None:
    param.copy_(value64.to(dtype=param.dtype, device=param.device))


class ProjectionParameter(EditSite):
    """A projection parameter P (w, d) used as z = x @ P (open_clip's `visual.proj`)."""

    form = "linear"

    def __init__(self, module: nn.Module, name: str = "proj"):
        self.module, self.name = module, name
        P = _param(module, name)
        if P.ndim != 2:
            raise EditSiteError(f"projection {name!r} must be a matrix; got shape {tuple(P.shape)}")

    @classmethod
    def at(cls, parent, name, target):
        if parent is not None and isinstance(target, nn.Parameter) and target.ndim == 2:
            return cls(parent, name)
        return None

    @property
    def P(self) -> torch.Tensor:
        return _param(self.module, self.name)

    @property
    def out_dim(self) -> int:
        return self.P.shape[1]

    def tensors(self):
        return {self.name: self.P}

    def _apply(self, delta, alpha):
        M = torch.eye(self.out_dim, dtype=torch.float64) + alpha * delta
        _assign(self.P, self.P.to(torch.float64).cpu() @ M.T)

    def _invert(self, delta, alpha):
        M = torch.eye(self.out_dim, dtype=torch.float64) + alpha * delta
        # P_old = P_new ((I + aA)^T)^{-1}  <=>  solve (I + aA) P_old^T = P_new^T
        _assign(self.P, torch.linalg.solve(M, self.P.to(torch.float64).cpu().T).T)


class LinearSite(EditSite):
    """A Linear layer z = W x + b onto the embedding space (HF `visual_projection`, `trunk.head`)."""

    form = "linear"

    def __init__(self, linear: nn.Linear):
        if not isinstance(linear, nn.Linear):
            raise EditSiteError(f"LinearSite needs an nn.Linear; got {type(linear).__name__}")
        self.linear = linear

    @classmethod
    def at(cls, parent, name, target):
        return cls(target) if isinstance(target, nn.Linear) else None

    @property
    def out_dim(self) -> int:
        return self.linear.out_features

    def tensors(self):
        out = {"weight": self.linear.weight}
        if self.linear.bias is not None:
            out["bias"] = self.linear.bias
        return out

    def _left_multiply(self, M: torch.Tensor) -> None:
        W = self.linear.weight
        _assign(W, M @ W.to(torch.float64).cpu())
        if self.linear.bias is not None:
            b = self.linear.bias
            _assign(b, M @ b.to(torch.float64).cpu())

    def _apply(self, delta, alpha):
        self._left_multiply(torch.eye(self.out_dim, dtype=torch.float64) + alpha * delta)

    def _invert(self, delta, alpha):
        self._left_multiply(torch.linalg.inv(torch.eye(self.out_dim, dtype=torch.float64) + alpha * delta))


class HeadAffineSite(EditSite):
    """The last affine of a residual pooling head, z = a + W2 u + b2 (SigLIP's `head.mlp.fc2`).

    Takes a head update B (p + 1, d) = [dW^T; db^T] solved with the design matrix
    H = [u; 1] / ||z|| (`platonic.solve.head_design_matrix`). The affine must have a bias.
    """

    form = "head_affine"

    def __init__(self, linear: nn.Linear):
        if not isinstance(linear, nn.Linear):
            raise EditSiteError(f"HeadAffineSite needs an nn.Linear; got {type(linear).__name__}")
        if linear.bias is None:
            raise EditSiteError("HeadAffineSite needs an affine with a bias (B's last row is the bias update)")
        self.linear = linear

    @classmethod
    def at(cls, parent, name, target):
        return cls(target) if isinstance(target, nn.Linear) and target.bias is not None else None

    @property
    def out_dim(self) -> int:
        return self.linear.out_features

    @property
    def in_dim(self) -> int:
        return self.linear.in_features

    def expected_delta_shape(self):
        """B (p + 1, d) = [dW^T; db^T]."""
        return (self.in_dim + 1, self.out_dim)

    def design_matrix(self, embeddings: ProbeEmbeddings) -> torch.Tensor:
        """H (N, p + 1) = [u; 1] / ||z||, float64 (`platonic.solve.head_design_matrix`).

        embeddings: z (N, d) and u (N, p), the inputs of the head's last affine on the N probes.
        """
        if embeddings.u is None:
            raise EditSiteError("a head site's design matrix needs u, the inputs of the head's last affine")
        return head_design_matrix(embeddings.u.double(), embeddings.z.double())

    def embedding_change(self, embeddings: ProbeEmbeddings, delta: torch.Tensor) -> torch.Tensor:
        """D (N, d) = [u; 1] B for B (p + 1, d), so folding at alpha maps z to z + alpha D (z's dtype)."""
        return super().embedding_change(embeddings, delta)

    def watch_inputs(self, sink: list):
        """Append u (the input of the last affine, (batch, p)) to `sink` on every forward."""
        return self.linear.register_forward_hook(lambda mod, args, out: sink.append(args[0].detach()))

    def tensors(self):
        return {"weight": self.linear.weight, "bias": self.linear.bias}

    def change_bound(self, delta, alpha):
        """Exact: the fold adds alpha [dW^T; db^T], so the ratio is |alpha| ||B||_F / ||[W, b]||_F."""
        base = (float(self.linear.weight.detach().double().norm()) ** 2 + float(self.linear.bias.detach().double().norm()) ** 2) ** 0.5
        return abs(alpha) * float(delta.double().norm()) / max(base, 1e-30)

    def _add(self, delta, scale):
        W, b = self.linear.weight, self.linear.bias
        _assign(W, W.to(torch.float64).cpu() + scale * delta[:-1].T)
        _assign(b, b.to(torch.float64).cpu() + scale * delta[-1])

    def _apply(self, delta, alpha):
        self._add(delta, alpha)

    def _invert(self, delta, alpha):
        self._add(delta, -alpha)


class IdentityAppendedLinear(nn.Module):
    """`inner` followed by a bias-free d x d Linear that starts as the identity."""

    def __init__(self, inner: nn.Module, dim: int):
        super().__init__()
        self.inner = inner
        self.linear = nn.Linear(dim, dim, bias=False)
        ref = next(iter(inner.parameters()), None)
        with torch.no_grad():
            self.linear.weight.copy_(torch.eye(dim))
        if ref is not None:
            self.linear.to(dtype=ref.dtype, device=ref.device)

    def forward(self, *args, **kwargs):
        return self.linear(self.inner(*args, **kwargs))


class AppendedLinearSite(LinearSite):
    """For towers with no final linear map: append a d x d identity Linear and edit that.

    `AppendedLinearSite.install(parent, "attr", d)` replaces `parent.attr` by
    `IdentityAppendedLinear(parent.attr, d)` (outputs unchanged until a fold); `remove()` puts the
    original module back.
    """

    def __init__(self, parent: nn.Module, attr: str, wrapper: IdentityAppendedLinear):
        super().__init__(wrapper.linear)
        self.parent, self.attr, self.wrapper = parent, attr, wrapper

    @classmethod
    def at(cls, parent, name, target):
        return None  # installed on purpose (`install`), never found by a rule

    @classmethod
    def install(cls, parent: nn.Module, attr: str, dim: int) -> "AppendedLinearSite":
        inner = getattr(parent, attr, None)
        if not isinstance(inner, nn.Module):
            raise EditSiteError(f"{type(parent).__name__}.{attr} is not a module; cannot append a linear after it")
        if isinstance(inner, IdentityAppendedLinear):
            return cls(parent, attr, inner)
        wrapper = IdentityAppendedLinear(inner, dim)
        setattr(parent, attr, wrapper)
        return cls(parent, attr, wrapper)

    def remove(self) -> None:
        setattr(self.parent, self.attr, self.wrapper.inner)


def appended_identity_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The parameters of every appended identity site in `module`: not part of the model, never trained."""
    return [p for m in module.modules() if isinstance(m, IdentityAppendedLinear) for p in m.linear.parameters()]


def embedding_change(z: torch.Tensor, u: torch.Tensor | None, operator: Operator) -> torch.Tensor:
    """D (N, d) of `operator` on embeddings z (N, d) (and head inputs u (N, p)), by its form alone.

    The same maths as `EditSite.embedding_change` (D = z A^T, or [u; 1] B), for callers that hold
    cached embeddings but no site; prefer the site's method, which also checks the delta's shape.
    """
    return _CHANGE_BY_FORM[operator.form](z, u, operator.delta)


@dataclass
class FoldRecord:
    """What `fold` did: the site, operator, strength, and a copy of the weights before it.

    `target_match` is set by `platonic.apply`: "current" when the operator was solved on the model's
    weights as they were, "pre-edit" when on its weights before its first platonic edit.
    """

    site: EditSite
    operator: Operator
    alpha: float
    original: dict[str, torch.Tensor]
    target_match: str | None = None


MAX_RELATIVE_CHANGE = 1e3  # ||W' - W|| / ||W|| of a fold; beyond it the edit swamps the weights it edits


def never_refused(bound: float | None) -> bool:
    """True when a fold whose relative change is at most `bound` (`EditSite.change_bound`, None: unknown) cannot
    be refused: a hundred times under MAX_RELATIVE_CHANGE, so no fold is needed to check it (`check_fold`)."""
    return bound is not None and bound <= MAX_RELATIVE_CHANGE / 100


def fold(site: EditSite, operator: Operator, alpha: float = 0.5) -> FoldRecord:
    """Fold `operator` into `site` at strength `alpha`, in place; returns a record for `unfold`.

    The folded weights are checked: a result that is not finite (inf / NaN), or that changes the site's
    weights by more than MAX_RELATIVE_CHANGE (1e3) times their norm (alpha = 1e30, say), is refused
    and the weights are restored.
    """
    alpha = as_finite_scalar("alpha", alpha)
    delta = site.check(operator)
    original = {name: t.detach().clone() for name, t in site.tensors().items()}
    site._apply(delta, alpha)
    problem = _fold_problem(original, site.tensors())
    if problem:
        with torch.no_grad():
            for name, live in site.tensors().items():
                live.copy_(original[name])
        raise EditSiteError(f"folding {operator.label} at alpha = {alpha:g} {problem}; the weights were restored. "
                            "Use a strength and coefficients of the paper's order (alpha 0.5 or 1, coefficients +-1)")
    return FoldRecord(site=site, operator=operator, alpha=alpha, original=original)


def _fold_problem(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> str | None:
    """Why folded weights are unusable (non-finite, or changed out of all proportion), or None."""
    change = base = 0.0
    for name, new in after.items():
        new = new.detach()
        if not torch.isfinite(new).all():
            return f"gives non-finite weights in {name!r} (inf or NaN)"
        old = before[name].double()
        change += float((new.double() - old).norm()) ** 2
        base += float(old.norm()) ** 2
    ratio = (change ** 0.5) / max(base ** 0.5, 1e-30)
    if ratio > MAX_RELATIVE_CHANGE:
        return f"changes the edited weights by {ratio:.3g} times their norm (more than {MAX_RELATIVE_CHANGE:g})"
    return None


def check_fold(site: EditSite, operator: Operator, alpha: float) -> None:
    """Refuse what `fold` would refuse (non-finite weights, a change beyond MAX_RELATIVE_CHANGE), leaving the
    weights as they are: the one bound for every path that evaluates an edit without folding it (the
    experiments' and recipes' fast path), so that they refuse the strengths `platonic apply` refuses.

    Where the site bounds the change from the operator alone (`EditSite.change_bound`) and the bound is a
    hundred times under MAX_RELATIVE_CHANGE, with a finite operator, no fold can be refused and none is
    made (the fast path checks thousands of compositions); otherwise the operator is folded and unfolded."""
    alpha = as_finite_scalar("alpha", alpha)
    delta = site.check(operator)
    if bool(torch.isfinite(delta).all()):
        if never_refused(site.change_bound(delta, alpha)):
            return
    unfold(fold(site, operator, alpha))


@torch.no_grad()
def unfold(record: FoldRecord) -> str:
    """Restore the weights saved by `fold`, bit for bit. Returns "exact"."""
    for name, live in record.site.tensors().items():
        live.copy_(record.original[name])
    return "exact"


def unfold_by_inversion(site: EditSite, operator: Operator, alpha: float) -> str:
    """Undo a fold with no saved copy by applying its inverse; returns "inverted".

    Exact in exact arithmetic; in float32 the weights come back to about 1e-6 relative.
    """
    alpha = as_finite_scalar("alpha", alpha)
    site._invert(site.check(operator), alpha)
    return "inverted"
