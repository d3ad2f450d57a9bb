"""OrthoReg fine-tunes as the descriptor sources of cross-model addition (issue 13, item 5; beyond both papers).

The question: do sources fine-tuned with OrthoReg (method.md §2, lambda sum_l ||dW_l^T dW_l - I||_F)
compose better *across models* through the closed form than plain ones? Both kinds come from one
recipe (`setup.baselines["finetunes"]`, a `sources.CachedSources`: the fine-tune cache), differing only
in lambda, so the comparison isolates the regulariser.

For each kind k (plain: lambda 0; OrthoReg: lambda chosen on validation from `lambdas`), every target x
unordered task pair (A, B) x source for A x source for B (sources != target), as `addition`:

    f_new = (I + alpha (A*(U_k[sA, A]) + A*(U_k[sB, B]))) f_pre,   alpha 0.5

with U_k[m, t] the descriptor of model m's fine-tune of kind k on task t; the oracle folds the target's
own descriptors of that kind. lambda: the grid value whose closed-form cells have the highest mean
accuracy on the two tasks' *validation* splits (ties: the smaller; `val_size` items of each at most),
so no choice sees a test split. Reported on the test splits and controls:

- retention = (closed form - zero-shot) / (oracle - zero-shot) per slot, each kind against its own
  oracle (and against the plain oracle, so a kind whose own fine-tunes are weaker cannot win on the ratio);
- control loss = zero-shot - closed form on the controls (points; positive = damage);
- the mean cosine between different models' descriptors of one task (method.md §1.1: 0.473 in the paper).

Cells: experiment "orthoreg_sources", methods zero_shot, plain_sources, plain_oracle, orthoreg_sources,
orthoreg_oracle, each with "lambda". results.json diagnostics["orthoreg_sources"]: the validation score
of every lambda, the chosen one, the descriptor cosines, the recipe and how many fine-tunes were trained.
"""

from __future__ import annotations

import time
from itertools import combinations
from typing import Callable, Sequence

from ...errors import InvalidInputError
from ...progress import track
from ..engine.fastpath import FeatureStore
from ..engine.setup import ExperimentSetup
from .paper import accuracies, cell_record

DEFAULT_LAMBDAS = (1.0, 10.0)
EXPERIMENT = "orthoreg_sources"
METHODS = ("zero_shot", "plain_sources", "plain_oracle", "orthoreg_sources", "orthoreg_oracle")


def _cross_model_cosine(setup: ExperimentSetup, descriptors: dict) -> float | None:
    """Mean cosine between two different models' descriptors of the same task (over tasks and model pairs)."""
    values = [descriptors[(a, t)].cosine(descriptors[(b, t)]) for t in setup.tasks for a, b in combinations(setup.models, 2)]
    return sum(values) / len(values) if values else None


def orthoreg_sources(setup: ExperimentSetup, store: FeatureStore, alpha: float = 0.5, progress: bool = True,
                     lambdas: Sequence[float] = DEFAULT_LAMBDAS, val_size: int | None = None, report: dict | None = None,
                     log: Callable[[str], None] | None = None) -> list[dict]:
    """Cross-model two-task addition with plain and with OrthoReg descriptor sources (module docstring)."""
    from ..engine.weight_space import check_lambdas, val_subset

    sources = setup.baselines.get("finetunes")
    if sources is None:
        return []
    if len(setup.models) < 2:
        raise InvalidInputError("orthoreg_sources moves descriptors between models; the setup needs two or more")
    lambdas = check_lambdas(lambdas)
    if val_size is not None and val_size < 1:
        raise InvalidInputError("val_size must be a positive number of items (or None: the whole split)")
    missing = [t for t, spec in setup.tasks.items() if spec.val is None]
    if missing:
        raise InvalidInputError(f"orthoreg_sources chooses lambda on validation splits; task(s) {', '.join(missing)} "
                                "have none: add FOLDER/val/CLASS/* images")
    report = report if report is not None else {}
    timings = report.setdefault("timings", {})
    say = log or (lambda msg: None)
    val = {t: val_subset(spec.val, val_size) for t, spec in setup.tasks.items()}
    pairs = list(combinations(setup.tasks, 2))

    start = time.perf_counter()
    descriptors = {lam: sources.descriptors(lam) for lam in (0.0, *lambdas)}
    timings["fine-tunes (or cache reads) and descriptors"] = time.perf_counter() - start
    say(f"orthoreg_sources: {len(descriptors)} source kinds ({sources.counts['trained']} fine-tunes trained, "
        f"{sources.counts['cached']} from the cache), {timings['fine-tunes (or cache reads) and descriptors']:.1f} s")

    def term(target, lam, model, task):
        key = ("orthoreg_source", lam, model, task)
        return key, store.operator(target, key, descriptors[lam][(model, task)]).residual

    def cross_cells(target):
        others = [m for m in setup.models if m != target]
        for a, b in pairs:
            for sa in others:
                for sb in others:
                    yield a, b, sa, sb

    # lambda on validation: mean accuracy of the closed-form cells on the two tasks' val splits
    start = time.perf_counter()
    totals = {lam: [] for lam in (0.0, *lambdas)}
    for target in track(list(setup.models), description="orthoreg_sources: lambda on validation", enabled=progress):
        for a, b, sa, sb in cross_cells(target):
            for lam in totals:
                terms = [(term(target, lam, sa, a)[0], 1.0), (term(target, lam, sb, b)[0], 1.0)]
                totals[lam].append((store.accuracy(target, val[a], terms, alpha) + store.accuracy(target, val[b], terms, alpha)) / 2)
        store.drop_deltas(target)
    scores = {lam: sum(v) / len(v) for lam, v in totals.items()}
    chosen = max(lambdas, key=lambda lam: (scores[lam], -lam))
    timings["lambda on validation"] = time.perf_counter() - start
    say(f"orthoreg_sources: lambda {chosen:g} (validation: " + ", ".join(f"lambda {lam:g} {100 * s:.2f}" for lam, s in scores.items())
        + f"), {timings['lambda on validation']:.1f} s")

    start = time.perf_counter()
    cells = []
    kinds = (("plain", 0.0), ("orthoreg", chosen))
    for target in track(list(setup.models), description="orthoreg_sources: test", enabled=progress):
        for a, b in pairs:
            slots = {"A": a, "B": b}
            zero = cell_record(EXPERIMENT, "zero_shot", target, [], [a, b], [], 0.0, accuracies(store, setup, target, slots, [], 0.0))
            cells.append({**zero, "lambda": 0.0})
            for kind, lam in kinds:
                (ka, ra), (kb, rb) = term(target, lam, target, a), term(target, lam, target, b)
                cell = cell_record(EXPERIMENT, f"{kind}_oracle", target, [target, target], [a, b], [1.0, 1.0], alpha,
                             accuracies(store, setup, target, slots, [(ka, 1.0), (kb, 1.0)], alpha), [ra, rb])
                cells.append({**cell, "lambda": lam})
        for a, b, sa, sb in cross_cells(target):
            slots = {"A": a, "B": b}
            for kind, lam in kinds:
                (ka, ra), (kb, rb) = term(target, lam, sa, a), term(target, lam, sb, b)
                cell = cell_record(EXPERIMENT, f"{kind}_sources", target, [sa, sb], [a, b], [1.0, 1.0], alpha,
                             accuracies(store, setup, target, slots, [(ka, 1.0), (kb, 1.0)], alpha), [ra, rb])
                cells.append({**cell, "lambda": lam})
        store.drop_deltas(target)
    timings["test splits at the chosen lambda"] = time.perf_counter() - start
    say(f"orthoreg_sources: {len(cells)} test records, {timings['test splits at the chosen lambda']:.1f} s")
    report.setdefault("diagnostics", {})[EXPERIMENT] = {
        "lambdas": list(lambdas), "validation": {f"{lam:g}": scores[lam] for lam in scores}, "chosen_lambda": chosen,
        "val_size": val_size, "cross_model_cosine": {f"{lam:g}": _cross_model_cosine(setup, descriptors[lam]) for lam in (0.0, chosen)},
        "sources": sources.describe()}
    return cells
