"""Operators and operator banks (method.md §1.2-1.3).

An `Operator` is a solved edit for one target model:

- form "linear": A (d, d), folded as f -> (I + alpha A) f (projection parameter, Linear, appended Linear);
- form "head_affine": B (p + 1, d) = [dW^T; db^T], folded as z -> z + alpha (dW u + db).

It carries the target's fingerprint, the grid it was solved on, and its terms: the signed list of
(coefficient, source, task) it is a sum of. Operators on one target and form add and scale (the solve
is linear in U, so this is exact). An `OperatorBank` keeps one operator per (source, task) for one
target; `compose({key: coefficient})` returns their signed sum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import torch

from ._checks import as_finite_scalar, as_matrix
from .descriptor import Descriptor, ProbeGrid, Provenance, utc_now
from .errors import ArtifactError, FingerprintMismatchError, InvalidInputError
from .hashing import tensor_digest
from .solve import DEFAULT_MU_A, DEFAULT_MU_B, RidgeSolver
from .storage import read_artifact, require_keys, write_artifact

FORMS = ("linear", "head_affine")


@dataclass(frozen=True)
class Term:
    """One signed term of an operator: coefficient * (operator of `source`'s descriptor of `task`)."""

    coefficient: float
    source: str
    task: str
    descriptor_digest: str = ""  # sha256 of the descriptor matrix the operator was solved from

    def to_json(self) -> dict:
        return {"coefficient": self.coefficient, "source": self.source, "task": self.task,
                "descriptor_digest": self.descriptor_digest}

    @classmethod
    def from_json(cls, data: dict) -> "Term":
        return cls(float(data["coefficient"]), data["source"], data["task"], data.get("descriptor_digest", ""))

    def scaled(self, c: float) -> "Term":
        return Term(c * self.coefficient, self.source, self.task, self.descriptor_digest)


def _require_descriptor(descriptor) -> None:
    if not isinstance(descriptor, Descriptor):
        raise InvalidInputError(f"Operator.solve needs a Descriptor; got {type(descriptor).__name__}")


@dataclass(frozen=True)
class Operator:
    """A solved edit for one target model.

    Attributes:
        delta: A (d, d) for form "linear"; B (p + 1, d) for form "head_affine".
        form: "linear" or "head_affine".
        target: fingerprint of the target weights the operator was solved on (`DualEncoder.fingerprint`
            when its embeddings were taken); `platonic.apply` accepts it on a model whose current
            weights, or whose weights before its first platonic edit, have this fingerprint.
        terms: the (coefficient, source, task) terms this operator is the sum of.
        grid: the probe grid it was solved on (None for sums over several grids).
        mu_a, mu_b: relative ridge weights used; residual: first-order relative residual (single solves).
        provenance: where the descriptor came from (single solves) and when this was made.
        solve_record: how it was solved (`RidgeSolver.describe()`: kind "paper" | "anchored", rank,
            truncation, anchor_weight, n_anchor, plus anchor_digest, the sha256 of the canonical pool
            inputs); kept by scaling and by sums of operators solved alike, else None.
    """

    delta: torch.Tensor
    form: str
    target: str
    terms: tuple[Term, ...]
    grid: ProbeGrid | None = None
    mu_a: float | None = None
    mu_b: float | None = None
    residual: float | None = None
    provenance: Provenance = field(default_factory=Provenance)
    solve_record: dict | None = field(default=None, hash=False)  # a dict: not hashable

    def __post_init__(self):
        if self.form not in FORMS:
            raise InvalidInputError(f"operator form must be one of {FORMS}; got {self.form!r}")
        delta = as_matrix(f"operator delta ({self.form})", self.delta)
        if self.form == "linear" and delta.shape[0] != delta.shape[1]:
            raise InvalidInputError(f"a linear operator is square (d x d); got shape {tuple(delta.shape)}")
        object.__setattr__(self, "delta", delta.detach())
        if not isinstance(self.target, str) or not self.target:
            raise InvalidInputError("operator target must be the target model's fingerprint (non-empty string)")
        object.__setattr__(self, "terms", tuple(self.terms))

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def solve(
        cls,
        F,
        G,
        descriptor: Descriptor,
        *,
        target: str,
        form: str = "linear",
        mu_a: float = DEFAULT_MU_A,
        mu_b: float = DEFAULT_MU_B,
    ) -> "Operator":
        """Solve `descriptor` on the target grid.

        F: (N, d) target probe embeddings (form "linear") or the design matrix H (N, p + 1) (form
        "head_affine"; `EditSite.design_matrix` gives either); G: (M, d) target prompt embeddings;
        both on the descriptor's probes and prompts. `target`: the fingerprint of the weights F and G
        were embedded with. Several descriptors on one grid share a factorisation with `from_solver`;
        an anchored or rank-capped solve comes as such a solver.
        """
        _require_descriptor(descriptor)
        return cls.from_solver(RidgeSolver(F, G, mu_a=mu_a, mu_b=mu_b), descriptor, target=target, form=form)

    @classmethod
    def from_solver(cls, solver: RidgeSolver, descriptor: Descriptor, *, target: str, form: str = "linear",
                    anchor_digest: str | None = None) -> "Operator":
        """Solve `descriptor` with a ready `RidgeSolver` for the target's (F or H, G) on its grid.

        X = solver.solve(U) (k, d); the operator's delta is A = X^T (d, d) for form "linear", B = X
        (p + 1, d) for "head_affine". `target` names the weights the solver's F and G came from;
        `anchor_digest` the inputs of an anchored solver's pool (recorded in `solve_record`).
        """
        _require_descriptor(descriptor)
        descriptor.require_plausible_scale()
        if not isinstance(solver, RidgeSolver):
            raise InvalidInputError(f"Operator.from_solver needs a RidgeSolver; got {type(solver).__name__}")
        if (solver.n_probes, solver.n_prompts) != descriptor.grid.shape:
            raise InvalidInputError(
                f"target embeddings cover {solver.n_probes} probes x {solver.n_prompts} prompts but the "
                f"descriptor of {descriptor.task!r} is {descriptor.grid.shape}; embed the descriptor's own probes and prompts"
            )
        X = solver.solve(descriptor.matrix)
        delta = X.T if form == "linear" else X
        return cls(
            delta=delta.contiguous(),
            form=form,
            target=target,
            terms=(Term(1.0, descriptor.provenance.source, descriptor.task, tensor_digest(descriptor.matrix)),),
            grid=descriptor.grid,
            mu_a=solver.mu_a,
            mu_b=solver.mu_b,
            residual=solver.relative_residual(X.double(), descriptor.matrix),
            provenance=descriptor.provenance,
            solve_record={**solver.describe(), "anchor_digest": anchor_digest},
        )

    # -- algebra --------------------------------------------------------------------------------
    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(t.task for t in self.terms)

    @property
    def label(self) -> str:
        """The terms as "+1*task@source -0.5*task2@source2"."""
        return " ".join(f"{t.coefficient:+g}*{t.task}@{t.source}" for t in self.terms) or "(no terms)"

    def _combine(self, other: "Operator", sign: float) -> "Operator":
        if self.target != other.target:
            raise FingerprintMismatchError(
                f"cannot add operators for different targets: {self.target} vs {other.target}"
            )
        if self.form != other.form or self.delta.shape != other.delta.shape:
            raise InvalidInputError(
                f"cannot add a {self.form} operator {tuple(self.delta.shape)} and a {other.form} operator "
                f"{tuple(other.delta.shape)}; they fold into different edit sites"
            )
        terms = self.terms + tuple(t.scaled(sign) for t in other.terms)
        return Operator(
            delta=self.delta + sign * other.delta.to(self.delta.dtype),
            form=self.form,
            target=self.target,
            terms=terms,
            grid=self.grid if self.grid == other.grid else None,
            provenance=Provenance(source="composition", finetune="derived", created=utc_now()),
            solve_record=self.solve_record if self.solve_record == other.solve_record else None,
        )

    def __add__(self, other):
        if not isinstance(other, Operator):
            return NotImplemented
        return self._combine(other, 1.0)

    def __radd__(self, other):
        if isinstance(other, (int, float)) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    def __sub__(self, other):
        if not isinstance(other, Operator):
            return NotImplemented
        return self._combine(other, -1.0)

    def __mul__(self, scalar):
        if isinstance(scalar, Operator) or isinstance(scalar, bool) or not isinstance(scalar, (int, float, torch.Tensor)):
            return NotImplemented
        c = as_finite_scalar("operator coefficient", scalar)
        return Operator(
            delta=self.delta * c,
            form=self.form,
            target=self.target,
            terms=tuple(t.scaled(c) for t in self.terms),
            grid=self.grid,
            mu_a=self.mu_a,
            mu_b=self.mu_b,
            residual=self.residual,
            provenance=self.provenance,
            solve_record=self.solve_record,
        )

    __rmul__ = __mul__

    def __neg__(self) -> "Operator":
        return self * -1.0

    def require_target(self, fingerprint: str) -> None:
        if fingerprint != self.target:
            raise FingerprintMismatchError(
                f"operator was solved for target {self.target} but the model is {fingerprint}; "
                "solve the descriptors again on this model"
            )

    # -- storage --------------------------------------------------------------------------------
    def metadata(self) -> dict:
        """The JSON record an operator file (or a bank entry) stores beside its delta."""
        return {
            "form": self.form,
            "target": self.target,
            "terms": [t.to_json() for t in self.terms],
            "grid": self.grid.to_json() if self.grid is not None else None,
            "mu_a": self.mu_a,
            "mu_b": self.mu_b,
            "residual": self.residual,
            "provenance": self.provenance.to_json(),
            "solve": self.solve_record,
        }

    @classmethod
    def from_metadata(cls, delta: torch.Tensor, meta: dict) -> "Operator":
        """The operator of a stored delta and its `metadata()` record."""
        return cls(
            delta=delta,
            form=meta["form"],
            target=meta["target"],
            terms=tuple(Term.from_json(t) for t in meta["terms"]),
            grid=ProbeGrid.from_json(meta["grid"]) if meta.get("grid") else None,
            mu_a=meta.get("mu_a"),
            mu_b=meta.get("mu_b"),
            residual=meta.get("residual"),
            provenance=Provenance.from_json(meta["provenance"]),
            solve_record=meta.get("solve"),
        )

    def save(self, path, overwrite: bool = False) -> None:
        """Write an operator file (atomic; an existing file is replaced only if it is an operator, or with overwrite)."""
        write_artifact(path, "operator", {"delta": self.delta}, self.metadata(), overwrite=overwrite)

    @classmethod
    def load(cls, path) -> "Operator":
        tensors, record = read_artifact(path, "operator")
        require_keys(path, record, tensors, ("delta",), ("form", "target", "terms", "provenance"))
        try:
            return cls.from_metadata(tensors["delta"], record)
        except (KeyError, TypeError) as exc:
            raise ArtifactError(f"{path}: malformed operator metadata ({exc})") from None

    def __repr__(self) -> str:
        return f"Operator({self.form}, shape={tuple(self.delta.shape)}, target={self.target[:16]}, {self.label})"


class OperatorBank:
    """One operator per (source, task) for one target model.

    Keys in `compose` may be a (source, task) tuple, "task@source", or "task" when the bank holds one
    source for that task.

    Example:
        >>> bank = OperatorBank(target="fp")
        >>> bank.add(op_eurosat); bank.add(op_dtd)                      # doctest: +SKIP
        >>> edit = bank.compose({"eurosat": 1.0, "dtd": -1.0})          # doctest: +SKIP
    """

    def __init__(self, target: str, operators=()):
        if not isinstance(target, str) or not target:
            raise InvalidInputError("an OperatorBank needs its target model's fingerprint")
        self.target = target
        self.entries: dict[tuple[str, str], Operator] = {}
        for op in operators:
            self.add(op)

    def add(self, operator: Operator, *, replace: bool = False) -> None:
        if not isinstance(operator, Operator):
            raise InvalidInputError(f"a bank holds Operators; got {type(operator).__name__}")
        if operator.target != self.target:
            raise FingerprintMismatchError(
                f"operator {operator.label} was solved for target {operator.target} but this bank's "
                f"target is {self.target}; keep one bank per target model"
            )
        if len(operator.terms) != 1 or operator.terms[0].coefficient != 1.0:
            raise InvalidInputError("a bank entry is the operator of one descriptor (a single term with coefficient 1)")
        key = (operator.terms[0].source, operator.terms[0].task)
        if key in self.entries and not replace:
            raise InvalidInputError(f"the bank already holds task {key[1]!r} from source {key[0]!r}; pass replace=True to overwrite")
        forms = {op.form for op in self.entries.values()} | {operator.form}
        if len(forms) > 1:
            raise InvalidInputError(f"a bank holds operators of one form; got {sorted(forms)}")
        self.entries[key] = operator

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries.values())

    @property
    def tasks(self) -> list[str]:
        return sorted({task for _, task in self.entries})

    def resolve(self, key) -> tuple[str, str]:
        """(source, task) for a key given as a tuple, "task@source" or "task"."""
        if isinstance(key, tuple) and len(key) == 2:
            source, task = key
        elif isinstance(key, str) and "@" in key:
            task, source = key.split("@", 1)
        elif isinstance(key, str):
            sources = [s for s, t in self.entries if t == key]
            if len(sources) == 1:
                return (sources[0], key)
            if not sources:
                raise InvalidInputError(f"the bank has no task {key!r}; it holds: {', '.join(self.tasks) or 'nothing'}")
            raise InvalidInputError(
                f"task {key!r} has {len(sources)} sources in the bank ({', '.join(sorted(sources))}); "
                f"name one as '{key}@SOURCE'"
            )
        else:
            raise InvalidInputError(f"bank key must be 'task', 'task@source' or (source, task); got {key!r}")
        if (source, task) not in self.entries:
            raise InvalidInputError(f"the bank has no entry for task {task!r} from source {source!r}")
        return (source, task)

    def compose(self, coefficients: Mapping) -> Operator:
        """sum_l c_l * operator_l over the given {key: coefficient}."""
        if not coefficients:
            raise InvalidInputError("compose needs at least one {task: coefficient} term")
        total, given = None, {}
        for key, c in coefficients.items():
            entry = self.resolve(key)
            if entry in given:
                raise InvalidInputError(f"terms {given[entry]!r} and {key!r} name the same bank entry "
                                        f"({entry[1]}@{entry[0]}); give each entry once, with the summed coefficient")
            given[entry] = key
            op = as_finite_scalar(f"coefficient of {key!r}", c) * self.entries[entry]
            total = op if total is None else total + op
        return total

    def require_target(self, fingerprint: str) -> None:
        if fingerprint != self.target:
            raise FingerprintMismatchError(
                f"this bank was solved for target {self.target} but the model is {fingerprint}; "
                "solve the descriptors again on this model"
            )

    # -- storage --------------------------------------------------------------------------------
    def save(self, path, overwrite: bool = False) -> None:
        """Write a bank file (atomic; an existing file is replaced only if it is a bank, or with overwrite)."""
        ops = list(self.entries.values())
        tensors = {f"entry.{i}": op.delta for i, op in enumerate(ops)}
        meta = {"target": self.target, "entries": [op.metadata() for op in ops]}
        write_artifact(path, "bank", tensors, meta, overwrite=overwrite)

    @classmethod
    def load(cls, path) -> "OperatorBank":
        tensors, record = read_artifact(path, "bank")
        require_keys(path, record, tensors, (), ("target", "entries"))
        bank = cls(record["target"])
        for i, meta in enumerate(record["entries"]):
            require_keys(path, record, tensors, (f"entry.{i}",))
            try:
                bank.add(Operator.from_metadata(tensors[f"entry.{i}"], meta))
            except (KeyError, TypeError) as exc:
                raise ArtifactError(f"{path}: malformed bank entry {i} ({exc})") from None
        return bank

    def __repr__(self) -> str:
        return f"OperatorBank(target={self.target[:16]}, entries={[f'{t}@{s}' for s, t in self.entries]})"
