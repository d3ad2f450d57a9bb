"""The fast path: every closed-form cell evaluated from features cached once per (model, data set).

An edit at the last affine changes only what comes after it: with z (n, d) the embeddings and u the
inputs of a head affine, folding operators O_l with coefficients c_l at strength alpha gives exactly

    z_new = z + alpha * sum_l c_l D_l,   D_l = z A_l^T (linear) or [u; 1] B_l (head affine)

(the edit site's `embedding_change`). So each D_l is computed once per evaluation set and every cell is
a sum, a normalisation and a product with the (unchanged) prompt embeddings. A test checks sampled
cells against folding the operators into the real model and evaluating end to end.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Hashable, Sequence

import torch

from ...bank import Operator
from ...descriptor import digest_probes
from ...edit import check_fold, never_refused
from ...errors import InvalidInputError
from ...measurement import EmbeddingCache, design_rows, target_grid
from ...metrics import top1
from ...models import DualEncoder, ProbeEmbeddings
from ...solve import RidgeSolver
from ...solve_config import SolveConfig
from .setup import EvalSet, ExperimentSetup, torch_threads

OperatorKey = Hashable


@contextmanager
def single_thread():
    """Run torch on one thread: the fast path is many small products, where threads cost more than they give."""
    with torch_threads(1):
        yield


class FeatureStore:
    """Cached features and operators for one ExperimentSetup.

    `solve` (a `platonic.SolveConfig`) says how operators are solved. `anchor_images` (P unlabeled inputs,
    e.g. (P, 3, H, W) uint8) is the anchored solve's pool for every task (default: each task's pool
    from the other tasks' probes); each target embeds it through its own design rows.
    """

    def __init__(self, setup: ExperimentSetup, cache: EmbeddingCache | None = None, progress: bool = False,
                 solve: SolveConfig | None = None, *, anchor_images: torch.Tensor | None = None):
        self.setup = setup
        self.solve = solve or SolveConfig()
        if anchor_images is not None and self.solve.kind != "anchored":
            raise InvalidInputError("anchor images were given but the solve is the paper's; use SolveConfig(kind='anchored')")
        self.cache = cache or EmbeddingCache()
        self.progress = progress
        self.anchor_images = anchor_images
        self._pools: dict[str, tuple[torch.Tensor, str]] = {}
        self._features: dict[tuple[str, str], ProbeEmbeddings] = {}
        self._prompts: dict[tuple[str, str], torch.Tensor] = {}
        self._solvers: dict[tuple[str, str], RidgeSolver] = {}
        self._operators: dict[tuple[str, OperatorKey], Operator] = {}
        self._deltas: dict[tuple[str, str, OperatorKey], torch.Tensor] = {}
        self._checked: set[tuple] = set()  # (target, terms, alpha) that `check_strength` let through
        self._unit_bounds: dict[tuple, float | None] = {}  # (target, operator key) -> its change bound at alpha 1

    def pool(self, task: str) -> tuple[torch.Tensor, str] | None:
        """(pool inputs, digest) of the anchored solve for operators of `task`; None for the paper's solve."""
        if self.solve.kind != "anchored":
            return None
        if task not in self._pools:
            if self.anchor_images is not None:
                images = self.anchor_images
            else:
                others = [spec.probes[: self.solve.anchor_per_task] for name, spec in self.setup.tasks.items() if name != task]
                if not others:
                    raise InvalidInputError(f"the anchored solve of {task!r} needs a pool: the setup has no other task "
                                            "whose probes could serve; give anchor images")
                images = torch.cat(others)
            self._pools[task] = (images, digest_probes(images))
        return self._pools[task]

    # -- features -------------------------------------------------------------------------------
    def features(self, model: str, eval_set: EvalSet) -> ProbeEmbeddings:
        key = (model, eval_set.name)
        if key not in self._features:
            emb = self.cache.probes(self.setup.models[model], eval_set.inputs, progress=self.progress)
            self._features[key] = ProbeEmbeddings(z=emb.z.double(), u=None if emb.u is None else emb.u.double())
        return self._features[key]

    def prompt_embeddings(self, model: str, eval_set: EvalSet) -> torch.Tensor:
        """G (M, d), normalised, float64."""
        key = (model, eval_set.name)
        if key not in self._prompts:
            g = self.cache.texts(self.setup.models[model], list(eval_set.prompts)).double()
            self._prompts[key] = torch.nn.functional.normalize(g, dim=1)
        return self._prompts[key]

    # -- operators ------------------------------------------------------------------------------
    def solver(self, target: str, task: str) -> RidgeSolver:
        key = (target, task)
        if key not in self._solvers:
            spec = self.setup.tasks[task]
            model = self.setup.models[target]
            F, G = target_grid(model, spec.probes, spec.prompts, cache=self.cache, progress=self.progress)
            pool = self.pool(task)
            anchor = None if pool is None else design_rows(model, pool[0], cache=self.cache, progress=self.progress)
            self._solvers[key] = RidgeSolver(F, G, anchor=anchor, **self.solve.solver_settings())
        return self._solvers[key]

    def operator(self, target: str, key: OperatorKey, descriptor) -> Operator:
        """The operator of `descriptor` on `target`, solved once and kept under `key`.

        Like `solve_bank`, it names the weights it was solved on (`target`'s fingerprint now)."""
        full = (target, key)
        if full not in self._operators:
            model = self.setup.models[target]
            solver = self.solver(target, descriptor.task)
            pool = self.pool(descriptor.task)
            self._operators[full] = Operator.from_solver(solver, descriptor, target=model.fingerprint, form=model.edit_site.form,
                                                         anchor_digest=None if pool is None else pool[1])
        return self._operators[full]

    def solved_operators(self) -> list[tuple[str, OperatorKey, Operator]]:
        """(target, key, operator) of every operator solved so far, in the order they were solved."""
        return [(target, key, op) for (target, key), op in self._operators.items()]

    def delta(self, target: str, eval_set: EvalSet, key: OperatorKey) -> torch.Tensor:
        """D (n, d) of the operator stored under `key`, on `eval_set`'s cached features."""
        full = (target, eval_set.name, key)
        if full not in self._deltas:
            feats = self.features(target, eval_set)
            site = self.setup.models[target].edit_site
            self._deltas[full] = site.embedding_change(feats, self._operators[(target, key)].delta)
        return self._deltas[full]

    def prefetch(self, progress: bool = True) -> None:
        """Encode every evaluation set and probe grid on every model (the only forward passes)."""
        from ...progress import track

        sets = [t.test for t in self.setup.tasks.values()] + list(self.setup.controls.values())
        for model in track(list(self.setup.models), description="caching features", enabled=progress):
            for eval_set in sets:
                self.features(model, eval_set)
                self.prompt_embeddings(model, eval_set)
            for task in self.setup.tasks:
                self.solver(model, task)

    def drop_deltas(self, target: str) -> None:
        """Free the per-set changes of one target (they are the memory-heavy part)."""
        self._deltas = {k: v for k, v in self._deltas.items() if k[0] != target}

    # -- evaluation -----------------------------------------------------------------------------
    def check_strength(self, target: str, terms: Sequence[tuple[OperatorKey, float]], alpha: float) -> None:
        """Refuse a composition and strength that `platonic.fold` would refuse on the real model (`edit.check_fold`:
        the weights are folded and restored), once per (target, terms, alpha)."""
        key = (target, tuple(terms), float(alpha))
        if key in self._checked:
            return
        site = self.setup.models[target].edit_site
        bounds = [self._unit_bound(site, target, op_key) for op_key, _ in terms]
        if None not in bounds and never_refused(abs(alpha) * sum(abs(c) * b for (_, c), b in zip(terms, bounds))):
            self._checked.add(key)  # the triangle inequality over `EditSite.change_bound`: no fold could be refused
            return
        total = None
        for op_key, c in terms:
            op = c * self._operators[(target, op_key)]
            total = op if total is None else total + op
        check_fold(site, total, alpha)
        self._checked.add(key)

    def _unit_bound(self, site, target: str, op_key) -> float | None:
        if (target, op_key) not in self._unit_bounds:
            self._unit_bounds[(target, op_key)] = site.change_bound(self._operators[(target, op_key)].delta, 1.0)
        return self._unit_bounds[(target, op_key)]

    def accuracy(self, target: str, eval_set: EvalSet, terms: Sequence[tuple[OperatorKey, float]] = (), alpha: float = 0.0) -> float:
        """Top-1 accuracy of `target` with sum_l c_l O_l folded at `alpha`, from cached features."""
        z = self.features(target, eval_set).z
        if terms and alpha:
            self.check_strength(target, terms, alpha)
            change = sum(c * self.delta(target, eval_set, key) for key, c in terms)
            z = z + alpha * change
        return top1(z, self.prompt_embeddings(target, eval_set), eval_set.labels)


def accuracy_end_to_end(model: DualEncoder, eval_set: EvalSet, cache=None) -> float:
    """Top-1 accuracy of a (really edited) model, encoding everything again, or reading the embeddings
    from `cache` (an EmbeddingCache, keyed by the model's weights and the inputs) when given."""
    if cache is None:
        z, g = model.encode_probes(eval_set.inputs).z, model.encode_texts(list(eval_set.prompts))
    else:
        z, g = cache.probes(model, eval_set.inputs, progress=False).z, cache.texts(model, list(eval_set.prompts))
    return top1(z.double(), g.double(), eval_set.labels)
