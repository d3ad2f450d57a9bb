"""The weight-space baselines of the paper's same-architecture table (method.md §1.7, §2), beside the
closed form on the same cells: classic task arithmetic within one model, and weight-space transport of
a task vector to another model of the same architecture (alpha chosen on validation in both).
"""

from __future__ import annotations

import time
from itertools import combinations, permutations
from typing import Callable

from ...errors import InvalidInputError
from ...progress import track
from ..engine import ExperimentSetup, Features, FeatureStore, Variants, aligned, val_subset
from .paper import Operators, accuracies, cell_record

WEIGHT_ALPHAS = tuple(round(0.1 * i, 1) for i in range(11))
# weight_space chooses alpha on at most this many items of each validation split (None: whole splits).
# On the world it binds on the two 26-class glyph tasks only (1,222 items each); measured there: the
# table within 0.15 points of whole splits, at two thirds of the time (docs/lab/2026-12-02-weight-space-baselines.md).
WEIGHT_SPACE_VAL_SIZE = 500


def same_architecture_pairs(setup: ExperimentSetup) -> list[tuple[str, str]]:
    """Ordered (source, target) pairs of different models with identical architecture ids."""
    ids = {name: m.architecture_id() for name, m in setup.models.items()}
    return [(a, b) for a, b in permutations(setup.models, 2) if ids[a] == ids[b]]


def _timed(timings: dict, phase: str, start: float, log=None, note: str = "") -> None:
    seconds = time.perf_counter() - start
    timings[phase] = timings.get(phase, 0.0) + seconds
    if log is not None:
        log(f"{phase}{note}: {seconds:.1f} s")


def weight_space(setup: ExperimentSetup, store: FeatureStore, alpha: float = 0.5, progress: bool = True,
                 val_size: int | None = WEIGHT_SPACE_VAL_SIZE, report: dict | None = None,
                 log: Callable[[str], None] | None = None) -> list[dict]:
    """Weight-space baselines on two-task addition, where they apply (method.md §2, §1.7).

    weight_transport: theta_B + a (tau_A + tau_B) with the task vectors of a same-architecture model A;
    task_arithmetic: theta_0 + a (tau_A + tau_B) within one model, on the transports' targets (so every
    row of the table is on the same targets; with no same-architecture pair, on every model). In both,
    a is chosen from {0, 0.1, ..., 1} by the mean accuracy on the two tasks' *validation* splits (ties:
    the smaller a; `val_size`: at most that many items of each, a seeded subset, default
    `WEIGHT_SPACE_VAL_SIZE`; None: the whole splits); the test splits and controls are then encoded
    once, at the chosen a. closed_form: the same cells (source = the pair's other model) through the
    closed form at `alpha`, solved from the descriptors of the *same* fine-tunes as the task vectors;
    zero_shot: one cell per target and task pair.

    Task vectors: setup.baselines["task_vector"](model, task) (the world and the toy setup: the
    fine-tune cache, `experiments.engine.sources`); their descriptors: baselines["finetunes"].descriptor when
    the setup has it, else setup.descriptors (a YAML setup's sources are its task vectors' fine-tunes).

    Speed: one working copy per target whose weights are set to theta + a tau in place; alpha 0 is the
    zero-shot features, encoded once per target; every evaluation encodes its sets in one batched pass.
    The time of each phase goes into report["timings"] and, with `log`, is printed as it ends.
    """
    task_vector = setup.baselines.get("task_vector")
    if task_vector is None:
        return []
    sources = setup.baselines.get("finetunes")
    pairs = same_architecture_pairs(setup)
    targets = list(dict.fromkeys(t for _, t in pairs)) or list(setup.models)
    runs = [(m, m) for m in targets] + pairs  # (source of the task vectors, target)
    timings: dict[str, float] = (report if report is not None else {}).setdefault("timings", {})
    ops = Operators(setup, store)
    tasks = list(setup.tasks)
    missing = [t for t in tasks if setup.tasks[t].val is None]
    if missing:
        raise InvalidInputError(f"weight_space chooses alpha on validation splits; task(s) {', '.join(missing)} have "
                                "none: add FOLDER/val/CLASS/* images")
    val = {t: val_subset(setup.tasks[t].val, val_size) for t in tasks}
    test = {t: setup.tasks[t].test for t in tasks}
    controls = list(setup.controls.values())

    start = time.perf_counter()
    taus = {}
    for m in dict.fromkeys(src for src, _ in runs):
        taus.update({(m, t): tau for t, tau in aligned({t: task_vector(m, t) for t in tasks}).items()})
    counts = getattr(sources, "counts", None)
    _timed(timings, "fine-tunes (or cache reads)", start, log, f" ({counts['trained']} trained, {counts['cached']} from the cache)"
           if counts else "")
    cells = []
    for target in track(list(dict.fromkeys(t for _, t in runs)), description="weight-space baselines", enabled=progress):
        feats = Features(setup.models[target])
        zero: dict = {}

        def zero_shot(sets, _feats=feats, _zero=zero, _model=setup.models[target]):
            missing = [s for s in sets if s.name not in _zero]
            if missing:
                _zero.update(_feats.encode(_model, missing))
            return {s.name: _zero[s.name] for s in sets}

        start = time.perf_counter()
        zero_shot([*val.values(), *test.values(), *controls])
        _timed(timings, "zero-shot encodes", start, log, f" ({target})")
        variants = Variants(feats, "full", zero_shot)
        for source in [s for s, t in runs if t == target]:
            method = "task_arithmetic" if source == target else "weight_transport"
            for a_task, b_task in combinations(tasks, 2):
                slots = {"A": a_task, "B": b_task}
                tau = taus[(source, a_task)] + taus[(source, b_task)]
                start = time.perf_counter()
                scores = {}
                for a in WEIGHT_ALPHAS:
                    z = variants.features(tau, a, [val[a_task], val[b_task]])
                    scores[a] = (feats.accuracy(z[val[a_task].name], val[a_task]) + feats.accuracy(z[val[b_task].name], val[b_task])) / 2
                best = max(scores, key=lambda a: (scores[a], -a))
                _timed(timings, "alpha on validation", start)
                start = time.perf_counter()
                sets = {"A": test[a_task], "B": test[b_task], **{c.name: c for c in controls}}
                z = variants.features(tau, best, list(sets.values()))
                accuracy = {name: feats.accuracy(z[s.name], s) for name, s in sets.items()}
                _timed(timings, "test at the chosen alpha", start)
                cells.append(cell_record("weight_space", method, target, [source, source], [a_task, b_task], [1.0, 1.0], best, accuracy))
                if source == target:
                    cells.append(cell_record("weight_space", "zero_shot", target, [], [a_task, b_task], [], 0.0,
                                       accuracies(store, setup, target, slots, [], 0.0)))
                else:
                    start = time.perf_counter()
                    terms, residuals = [], []
                    for t in (a_task, b_task):
                        if sources is not None:
                            key = ("same_finetune", source, t)
                            residuals.append(store.operator(target, key, sources.descriptor(source, t)).residual)
                        else:
                            key, r = ops.real(target, source, t)
                            residuals.append(r)
                        terms.append((key, 1.0))
                    cells.append(cell_record("weight_space", "closed_form", target, [source, source], [a_task, b_task], [1.0, 1.0], alpha,
                                       accuracies(store, setup, target, slots, terms, alpha), residuals))
                    _timed(timings, "closed form (descriptors, fast path)", start)
        if log is not None:
            log(f"weight_space: {target} done; so far " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
        store.drop_deltas(target)
    return cells
