"""Universal task descriptors (method.md §1.1) and their checked algebra.

A `Descriptor` is the (N, M) matrix

    UTD[i, j] = <f_ft(x_i), g(p_j)> - <f_pre(x_i), g(p_j)>

together with the `ProbeGrid` it was measured on (task, ordered prompts, probe digest) and its
`Provenance`. The matrix is meaningless without its grid, so every operation checks grids:

- same grid: ordinary matrix algebra, the result is a `Descriptor`
  (two sources of one task add; `mean` is their consensus);
- different grids: `+` and `-` build a `Composition`, a formal signed sum of (coefficient,
  descriptor) terms. It is realised term by term later (each term solved on its own grid, the
  results summed with their coefficients), which is exact for the closed form because the solve
  is linear in U.

Scalars multiply and divide either; `sum()` works (`0 + d` is `d`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable, Sequence, TypeVar

import torch

from ._checks import as_finite_scalar, as_matrix
from ._version import __version__
from .errors import ArtifactError, GridMismatchError, InvalidInputError, InvalidOperationError
from .hashing import input_digest
from .storage import read_artifact, require_keys, write_artifact

T = TypeVar("T")


def library_version() -> str:
    """The platonic version recorded in provenance."""
    return __version__


def utc_now() -> str:
    """ISO-8601 UTC time; honours SOURCE_DATE_EPOCH so that builds can be byte-reproducible."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = datetime.fromtimestamp(int(epoch), timezone.utc) if epoch else datetime.now(timezone.utc)
    return moment.replace(microsecond=0).isoformat()


def digest_probes(probes: torch.Tensor) -> str:
    """sha256 hex digest of the canonical probe tensor: its dtype, shape and raw bytes (C order).

    The canonical tensor is the one shared copy every model is fed from (e.g. (N, 3, 224, 224) uint8).
    """
    if not isinstance(probes, torch.Tensor):
        raise InvalidInputError(f"probes must be a tensor; got {type(probes).__name__}")
    if probes.ndim == 0 or probes.shape[0] == 0:
        raise InvalidInputError(f"probes must hold at least one probe along dim 0; got shape {tuple(probes.shape)}")
    return input_digest(probes)


@dataclass(frozen=True)
class ProbeGrid:
    """The probes and prompts a descriptor is measured on.

    Attributes:
        task: task name, e.g. "eurosat".
        prompts: the M class prompts, in column order, e.g. ("a photo of a cat.", ...).
        probe_digest: sha256 hex digest of the canonical probe tensor (see `digest_probes`).
        n_probes: N, the number of probes (rows).
    """

    task: str
    prompts: tuple[str, ...]
    probe_digest: str
    n_probes: int

    def __post_init__(self):
        if not isinstance(self.task, str) or not self.task.strip():
            raise InvalidInputError("ProbeGrid.task must be a non-empty task name")
        prompts = tuple(self.prompts) if not isinstance(self.prompts, str) else None
        if prompts is None or not all(isinstance(p, str) for p in prompts):
            raise InvalidInputError("ProbeGrid.prompts must be a sequence of strings, one per class")
        if not prompts:
            raise InvalidInputError(f"ProbeGrid for task {self.task!r} has no prompts; give one prompt per class")
        seen: dict[str, int] = {}
        for i, p in enumerate(prompts):
            if p in seen:
                raise InvalidInputError(
                    f"ProbeGrid for task {self.task!r} has duplicate prompt {p!r} at positions {seen[p]} and {i}; "
                    "each column must be a distinct class prompt"
                )
            seen[p] = i
        object.__setattr__(self, "prompts", prompts)
        digest = self.probe_digest
        if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
            raise InvalidInputError(f"ProbeGrid.probe_digest must be a sha256 hex digest (64 lowercase hex chars); got {digest!r}")
        if isinstance(self.n_probes, bool) or not isinstance(self.n_probes, int) or self.n_probes < 1:
            raise InvalidInputError(f"ProbeGrid.n_probes must be a positive integer; got {self.n_probes!r}")

    @classmethod
    def from_probes(cls, task: str, prompts: Sequence[str], probes: torch.Tensor) -> "ProbeGrid":
        """Grid of `probes` (canonical tensor, N along dim 0) and `prompts` for `task`."""
        return cls(task=task, prompts=tuple(prompts), probe_digest=digest_probes(probes), n_probes=int(probes.shape[0]))

    @property
    def n_prompts(self) -> int:
        return len(self.prompts)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_probes, self.n_prompts)

    def differences(self, other: "ProbeGrid") -> list[str]:
        """Human-readable list of what differs between two grids (empty when equal)."""
        out = []
        if self.task != other.task:
            out.append(f"task {self.task!r} vs {other.task!r}")
        if self.n_probes != other.n_probes:
            out.append(f"N {self.n_probes} vs {other.n_probes} probes")
        if self.probe_digest != other.probe_digest:
            out.append(f"probe digest {self.probe_digest[:12]}… vs {other.probe_digest[:12]}…")
        if self.prompts != other.prompts:
            out.append(f"prompts ({self.n_prompts}: {self.prompts[0]!r}, …) vs ({other.n_prompts}: {other.prompts[0]!r}, …)")
        return out

    def require_same(self, other: "ProbeGrid", what: str) -> None:
        diff = self.differences(other)
        if diff:
            raise GridMismatchError(
                f"{what} needs descriptors on one probe grid, but they differ in: {'; '.join(diff)}. "
                "Measure both on the same probes and prompts, or combine them as a Composition with + / -."
            )

    def to_json(self) -> dict:
        return {"task": self.task, "prompts": list(self.prompts), "probe_digest": self.probe_digest, "n_probes": self.n_probes}

    @classmethod
    def from_json(cls, data: dict) -> "ProbeGrid":
        return cls(task=data["task"], prompts=tuple(data["prompts"]), probe_digest=data["probe_digest"], n_probes=int(data["n_probes"]))


@dataclass(frozen=True)
class Provenance:
    """Where a descriptor (or anything derived from one) came from.

    Attributes:
        source: the source model id (e.g. "open_clip:ViT-B-32/laion2b_s34b_b79k"), or an expression
            such as "mean(a, b)" for derived descriptors.
        finetune: what the fine-tune was (file, adapter, recipe), or "derived".
        library_version: platonic version that made it.
        created: ISO-8601 UTC creation time.
    """

    source: str = "unknown"
    finetune: str = "unknown"
    library_version: str = field(default_factory=library_version)
    created: str = field(default_factory=utc_now)

    def to_json(self) -> dict:
        return {"source": self.source, "finetune": self.finetune, "library_version": self.library_version, "created": self.created}

    @classmethod
    def from_json(cls, data: dict) -> "Provenance":
        return cls(**{k: str(data[k]) for k in ("source", "finetune", "library_version", "created")})


def _derived(source: str) -> Provenance:
    return Provenance(source=source, finetune="derived")


def _fmt(c: float) -> str:
    return f"{c:g}"


MAX_ENTRY = 1e3  # |U| of a measured descriptor is at most 2 (a difference of cosines); see `require_plausible_scale`


class Descriptor:
    """A universal task descriptor: `matrix` (N, M) on `grid`, with `provenance`.

    Example:
        >>> grid = ProbeGrid.from_probes("toy", ["a", "b"], torch.zeros(3, 1, dtype=torch.uint8))
        >>> d = Descriptor(torch.ones(3, 2), grid)
        >>> (0.5 * d + d).matrix[0, 0].item()
        1.5
    """

    __slots__ = ("matrix", "grid", "provenance")

    def __init__(self, matrix, grid: ProbeGrid, provenance: Provenance | None = None):
        if not isinstance(grid, ProbeGrid):
            raise InvalidInputError(f"grid must be a ProbeGrid; got {type(grid).__name__}")
        matrix = as_matrix(f"descriptor matrix for task {grid.task!r}", matrix)
        if tuple(matrix.shape) != grid.shape:
            raise InvalidInputError(
                f"descriptor matrix for task {grid.task!r} has shape {tuple(matrix.shape)} but its grid has "
                f"N={grid.n_probes} probes and M={grid.n_prompts} prompts; expected {grid.shape}"
            )
        self.matrix = matrix.detach()
        self.grid = grid
        self.provenance = provenance if provenance is not None else Provenance()

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_embeddings(cls, f_pre, f_ft, g, grid: ProbeGrid, provenance: Provenance | None = None) -> "Descriptor":
        """UTD = normalise(f_ft) g^T - normalise(f_pre) g^T, shape (N, M).

        f_pre, f_ft: (N, d) image (or audio) embeddings before/after fine-tuning; g: (M, d) prompt
        embeddings of the frozen text tower. All are L2-normalised here; computed in float64.
        """
        f_pre = as_matrix("f_pre (N x d)", f_pre, rows=grid.n_probes)
        f_ft = as_matrix("f_ft (N x d)", f_ft, rows=grid.n_probes, cols=f_pre.shape[1])
        g = as_matrix("g (M x d)", g, rows=grid.n_prompts, cols=f_pre.shape[1])
        unit = lambda x: torch.nn.functional.normalize(x.to(torch.float64), dim=1)  # noqa: E731
        U = (unit(f_ft) - unit(f_pre)) @ unit(g).T
        return cls(U.to(f_pre.dtype), grid, provenance)

    def random_like(self, seed: int) -> "Descriptor":
        """Gaussian matrix of this shape scaled to this Frobenius norm (the paper's random-UTD baseline)."""
        gen = torch.Generator().manual_seed(int(seed))
        noise = torch.randn(self.matrix.shape, generator=gen, dtype=torch.float64)
        scaled = noise * (float(torch.linalg.matrix_norm(self.matrix.double())) / float(torch.linalg.matrix_norm(noise)))
        return Descriptor(scaled.to(self.matrix.dtype), self.grid, _derived(f"random(seed={seed}, like {self.provenance.source})"))

    # -- inspection ---------------------------------------------------------------------------
    @property
    def task(self) -> str:
        return self.grid.task

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.matrix.shape)

    def require_plausible_scale(self) -> "Descriptor":
        """Refuse entries beyond MAX_ENTRY: a measured descriptor's entries are differences of cosine
        similarities (|U| <= 2), and a composition's a few of those, so 1e30 is a descriptor scaled by
        mistake, whose operator would swamp the weights. Solves and the adapter fit call this."""
        top = float(self.matrix.abs().max())
        if top > MAX_ENTRY:
            raise InvalidInputError(
                f"the descriptor of {self.task!r} ({self.provenance.source}) has entries up to {top:.3g}, but a measured "
                f"descriptor's are differences of cosine similarities (at most 2; here at most {MAX_ENTRY:g}): it was "
                "scaled by mistake. Measure it again, and put a strength in the terms' coefficients or alpha")
        return self

    def norm(self) -> float:
        """Frobenius norm ||U||_F."""
        return float(torch.linalg.matrix_norm(self.matrix.double()))

    def cosine(self, other: "Descriptor") -> float:
        """<U, V>_F / (||U|| ||V||); both on one grid."""
        other = _require_descriptor(other, "cosine")
        self.grid.require_same(other.grid, "cosine")
        a, b = self.matrix.double().flatten(), other.matrix.double().flatten()
        na, nb = float(a.norm()), float(b.norm())
        if na == 0 or nb == 0:
            raise InvalidInputError("cosine of a zero descriptor is undefined (one of the two is all zeros)")
        return float(a @ b) / (na * nb)

    def __repr__(self) -> str:
        return (f"Descriptor(task={self.task!r}, shape={self.shape}, norm={self.norm():.4g}, "
                f"source={self.provenance.source!r})")

    # -- algebra --------------------------------------------------------------------------------
    def _same_grid(self, other: "Descriptor", op: str, matrix) -> "Descriptor":
        return Descriptor(matrix, self.grid, _derived(f"({self.provenance.source} {op} {other.provenance.source})"))

    def __add__(self, other):
        if isinstance(other, Composition):
            return Composition.of(self) + other
        if not isinstance(other, Descriptor):
            return NotImplemented
        if self.grid == other.grid:
            return self._same_grid(other, "+", self.matrix + other.matrix.to(self.matrix.dtype))
        return Composition(((1.0, self), (1.0, other)))

    def __radd__(self, other):
        if isinstance(other, (int, float)) and not isinstance(other, bool) and other == 0:
            return self  # sum() starts from 0
        return NotImplemented

    def __sub__(self, other):
        if isinstance(other, (Descriptor, Composition)):
            return self + (-other)
        return NotImplemented

    def __neg__(self) -> "Descriptor":
        return Descriptor(-self.matrix, self.grid, _derived(f"-{self.provenance.source}"))

    def __mul__(self, scalar):
        if isinstance(scalar, (Descriptor, Composition)):
            raise InvalidOperationError("descriptors multiply by scalars only; a product of two descriptors has no meaning")
        if not isinstance(scalar, (int, float, torch.Tensor)) or isinstance(scalar, bool):
            return NotImplemented
        c = as_finite_scalar("scalar coefficient", scalar)
        return Descriptor(self.matrix * c, self.grid, _derived(f"{_fmt(c)}*{self.provenance.source}"))

    __rmul__ = __mul__

    def __truediv__(self, scalar):
        if not isinstance(scalar, (int, float, torch.Tensor)) or isinstance(scalar, bool):
            return NotImplemented
        c = as_finite_scalar("divisor", scalar)
        if c == 0:
            raise InvalidInputError("division of a descriptor by zero")
        return self * (1.0 / c)

    @staticmethod
    def mean(descriptors: Iterable["Descriptor"]) -> "Descriptor":
        """Consensus of several descriptors on one grid (e.g. several source models of one task)."""
        return mean(descriptors)

    # -- storage --------------------------------------------------------------------------------
    def save(self, path, overwrite: bool = False) -> None:
        """Write to a safetensors file with the grid and provenance in its metadata (atomic).

        An existing file is replaced only when it is a descriptor, or with `overwrite`.
        """
        meta = {"grid": self.grid.to_json(), "provenance": self.provenance.to_json()}
        write_artifact(path, "descriptor", {"matrix": self.matrix}, meta, overwrite=overwrite)

    @classmethod
    def load(cls, path) -> "Descriptor":
        """Read a descriptor file written by `save` (refuses other kinds and malformed metadata)."""
        tensors, record = read_artifact(path, "descriptor")
        require_keys(path, record, tensors, ("matrix",), ("grid", "provenance"))
        try:
            return cls(tensors["matrix"], ProbeGrid.from_json(record["grid"]), Provenance.from_json(record["provenance"]))
        except (KeyError, TypeError) as exc:
            raise ArtifactError(f"{path}: malformed descriptor metadata ({exc})") from None


def _require_descriptor(x, op: str) -> Descriptor:
    if not isinstance(x, Descriptor):
        raise InvalidInputError(f"{op} needs a Descriptor; got {type(x).__name__}")
    return x


def mean(descriptors: Iterable[Descriptor]) -> Descriptor:
    """Element-wise mean of descriptors that share one grid (a consensus of several sources)."""
    items = [_require_descriptor(d, "mean") for d in descriptors]
    if not items:
        raise InvalidInputError("mean of no descriptors is undefined; pass at least one")
    for d in items[1:]:
        items[0].grid.require_same(d.grid, "mean")
    stacked = torch.stack([d.matrix.to(items[0].matrix.dtype) for d in items])
    sources = ", ".join(d.provenance.source for d in items)
    return Descriptor(stacked.mean(dim=0), items[0].grid, _derived(f"mean({sources})"))


class Composition:
    """A signed, weighted sum of descriptor terms that may live on different grids.

    `terms` is a tuple of (coefficient, Descriptor). Built by `+`/`-` of descriptors on different
    grids; scalars distribute over the terms. `realise(f)` returns sum_l c_l f(U_l), e.g. with
    `f` the closed-form solve on the target: each term is solved on its own grid.
    """

    __slots__ = ("terms",)

    def __init__(self, terms: Iterable[tuple[float, Descriptor]]):
        checked = []
        for c, d in terms:
            checked.append((as_finite_scalar("composition coefficient", c), _require_descriptor(d, "Composition")))
        if not checked:
            raise InvalidInputError("a Composition needs at least one (coefficient, descriptor) term")
        self.terms: tuple[tuple[float, Descriptor], ...] = tuple(checked)

    @classmethod
    def of(cls, descriptor: Descriptor, coefficient: float = 1.0) -> "Composition":
        return cls(((coefficient, descriptor),))

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(d.task for _, d in self.terms)

    def merged(self) -> "Composition":
        """Same composition with terms on one grid summed into one descriptor (coefficient 1)."""
        groups: dict[ProbeGrid, list[tuple[float, Descriptor]]] = {}
        for c, d in self.terms:
            groups.setdefault(d.grid, []).append((c, d))
        out = []
        for items in groups.values():
            if len(items) == 1:
                out.append(items[0])
            else:
                out.append((1.0, sum((c * d for c, d in items), 0)))
        return Composition(out)

    def realise(self, fn: Callable[[Descriptor], T]) -> T:
        """sum_l c_l * fn(descriptor_l)."""
        total = None
        for c, d in self.terms:
            part = fn(d) * c
            total = part if total is None else total + part
        return total

    def __add__(self, other):
        if isinstance(other, Descriptor):
            other = Composition.of(other)
        if not isinstance(other, Composition):
            return NotImplemented
        return Composition(self.terms + other.terms)

    def __radd__(self, other):
        if isinstance(other, (int, float)) and not isinstance(other, bool) and other == 0:
            return self
        if isinstance(other, Descriptor):
            return Composition.of(other) + self
        return NotImplemented

    def __neg__(self) -> "Composition":
        return Composition((-c, d) for c, d in self.terms)

    def __sub__(self, other):
        if isinstance(other, (Descriptor, Composition)):
            return self + (-other)
        return NotImplemented

    def __mul__(self, scalar):
        if isinstance(scalar, (Descriptor, Composition)):
            raise InvalidOperationError("compositions multiply by scalars only")
        if not isinstance(scalar, (int, float, torch.Tensor)) or isinstance(scalar, bool):
            return NotImplemented
        s = as_finite_scalar("scalar coefficient", scalar)
        return Composition((c * s, d) for c, d in self.terms)

    __rmul__ = __mul__

    def __truediv__(self, scalar):
        s = as_finite_scalar("divisor", scalar)
        if s == 0:
            raise InvalidInputError("division of a composition by zero")
        return self * (1.0 / s)

    def __len__(self) -> int:
        return len(self.terms)

    def __repr__(self) -> str:
        body = " ".join(f"{'+' if c >= 0 else '-'}{_fmt(abs(c))}*{d.task}[{d.provenance.source}]" for c, d in self.terms)
        return f"Composition({body})"
