"""The paper's experiment protocols on an ExperimentSetup (method.md §1.5-1.7), through the fast path.

Each protocol returns a list of cell records (plain dicts, see docs/results.md):

    {"experiment", "method", "target", "sources", "tasks", "coefficients", "alpha",
     "accuracy": {slot or control name: top-1}, "residuals": [...]}

- addition: every target x unordered task pair x source for each term (sources != target); methods
  zero_shot, random, single_a, single_b, closed_form, oracle; folded at alpha (0.5).
- negation: every target x source != target x task; closed form with c = -1 at alpha 1; zero_shot,
  target_as_source (the target's own descriptor), and gradient_ascent when the setup provides it.
- generalization: operators of the related group applied to the held-out related task.
- alpha_sweep: single-term cross-model additions at several strengths.
- weight_space: classic task arithmetic within one model and weight-space transport between models of
  one architecture (alpha chosen on validation), beside the closed form on the same cells.

Each is one entry of `experiments.registry.PROTOCOLS`, with its defaults, methods, labels and reference.
"""

from __future__ import annotations

import time
from itertools import combinations, permutations
from typing import Callable, Iterable

from ..errors import InvalidInputError
from ..progress import track
from .fastpath import FeatureStore, accuracy_end_to_end
from .setup import ExperimentSetup

RANDOM_SEED = 42


def _random_seed(setup: ExperimentSetup, source: str, task: str) -> int:
    """A fixed seed per (source, task), so the random baseline is the same descriptor in every cell."""
    return RANDOM_SEED + 1000 * list(setup.models).index(source) + list(setup.tasks).index(task)


class Operators:
    """Keys for the operators a cell uses: ("real", source, task), ("random", source, task)."""

    def __init__(self, setup: ExperimentSetup, store: FeatureStore):
        self.setup, self.store = setup, store

    def real(self, target: str, source: str, task: str):
        key = ("real", source, task)
        op = self.store.operator(target, key, self.setup.descriptors[(source, task)])
        return key, op.residual

    def random(self, target: str, source: str, task: str):
        key = ("random", source, task)
        desc = self.setup.descriptors[(source, task)]
        op = self.store.operator(target, key, desc.random_like(_random_seed(self.setup, source, task)))
        return key, op.residual


def _accuracies(store: FeatureStore, setup: ExperimentSetup, target: str, slots: dict, terms, alpha: float) -> dict:
    sets = {**{slot: setup.tasks[task].test for slot, task in slots.items()}, **setup.controls}
    return {name: store.accuracy(target, eval_set, terms, alpha) for name, eval_set in sets.items()}


def _cell(experiment, method, target, sources, tasks, coefficients, alpha, accuracy, residuals=()) -> dict:
    return {"experiment": experiment, "method": method, "target": target, "sources": list(sources),
            "tasks": list(tasks), "coefficients": list(coefficients), "alpha": alpha,
            "accuracy": accuracy, "residuals": [round(r, 6) for r in residuals]}


def addition(setup: ExperimentSetup, store: FeatureStore, alpha: float = 0.5, progress: bool = True) -> list[dict]:
    ops = Operators(setup, store)
    cells = []
    pairs = list(combinations(setup.tasks, 2))
    for target in track(list(setup.models), description="addition: targets", enabled=progress):
        sources = [m for m in setup.models if m != target]
        for a, b in pairs:
            slots = {"A": a, "B": b}
            cells.append(_cell("addition", "zero_shot", target, [], [a, b], [], 0.0, _accuracies(store, setup, target, slots, [], 0.0)))
            (ka, ra), (kb, rb) = ops.real(target, target, a), ops.real(target, target, b)
            cells.append(_cell("addition", "oracle", target, [target, target], [a, b], [1, 1], alpha,
                               _accuracies(store, setup, target, slots, [(ka, 1.0), (kb, 1.0)], alpha), [ra, rb]))
            for sa in sources:
                for sb in sources:
                    (ka, ra), (kb, rb) = ops.real(target, sa, a), ops.real(target, sb, b)
                    (qa, xa), (qb, xb) = ops.random(target, sa, a), ops.random(target, sb, b)
                    for method, terms, residuals in (
                        ("closed_form", [(ka, 1.0), (kb, 1.0)], [ra, rb]),
                        ("single_a", [(ka, 1.0)], [ra]),
                        ("single_b", [(kb, 1.0)], [rb]),
                        ("random", [(qa, 1.0), (qb, 1.0)], [xa, xb]),
                    ):
                        cells.append(_cell("addition", method, target, [sa, sb], [a, b], [c for _, c in terms], alpha,
                                           _accuracies(store, setup, target, slots, terms, alpha), residuals))
        store.drop_deltas(target)
    return cells


def negation(setup: ExperimentSetup, store: FeatureStore, alpha: float = 1.0, progress: bool = True) -> list[dict]:
    ops = Operators(setup, store)
    cells = []
    for target in track(list(setup.models), description="negation: targets", enabled=progress):
        for task in setup.tasks:
            slots = {"A": task}
            cells.append(_cell("negation", "zero_shot", target, [], [task], [], 0.0, _accuracies(store, setup, target, slots, [], 0.0)))
            key, r = ops.real(target, target, task)
            cells.append(_cell("negation", "target_as_source", target, [target], [task], [-1.0], alpha,
                               _accuracies(store, setup, target, slots, [(key, -1.0)], alpha), [r]))
            for source in (m for m in setup.models if m != target):
                key, r = ops.real(target, source, task)
                cells.append(_cell("negation", "closed_form", target, [source], [task], [-1.0], alpha,
                                   _accuracies(store, setup, target, slots, [(key, -1.0)], alpha), [r]))
        store.drop_deltas(target)
    return cells


def negation_gradient_ascent(setup: ExperimentSetup, store: FeatureStore, progress: bool = True) -> list[dict]:
    """The labelled gradient-ascent baseline of the negation table, when the setup provides it.

    It trains every (target, task), so it runs outside the fast path (and with all threads); the edited
    models' embeddings go through the store's embedding cache (a second run with the same edits
    encodes nothing).
    """
    ascend: Callable | None = setup.baselines.get("gradient_ascent")
    if ascend is None:
        return []
    cells = []
    pairs = [(t, k) for t in setup.models for k in setup.tasks]
    for target, task in track(pairs, description="negation: gradient ascent", enabled=progress):
        edited = ascend(target, task)
        sets = {"A": setup.tasks[task].test, **setup.controls}
        cells.append(_cell("negation", "gradient_ascent", target, [], [task], [], 0.0,
                           {name: accuracy_end_to_end(edited, s, store.cache) for name, s in sets.items()}))
    return cells


def generalization(setup: ExperimentSetup, store: FeatureStore, alpha: float = 0.5, progress: bool = True) -> list[dict]:
    """Operators of the related group's tasks applied to the held-out related task (no operator of its own)."""
    if not setup.related_group or setup.held_out is None:
        return []
    ops = Operators(setup, store)
    held, group = setup.held_out, list(setup.related_group)
    cells = []
    for target in track(list(setup.models), description="generalization: targets", enabled=progress):
        slots = {"A": held}
        cells.append(_cell("generalization", "zero_shot", target, [], [held], [], 0.0, _accuracies(store, setup, target, slots, [], 0.0)))
        sources = [m for m in setup.models if m != target]
        for source in sources:
            for task in group:
                key, r = ops.real(target, source, task)
                cells.append(_cell("generalization", "one_operator", target, [source], [task], [1.0], alpha,
                                   _accuracies(store, setup, target, slots, [(key, 1.0)], alpha), [r]))
        for t1, t2 in combinations(group, 2):
            for source in sources:
                (k1, r1), (k2, r2) = ops.real(target, source, t1), ops.real(target, source, t2)
                cells.append(_cell("generalization", "two_one_source", target, [source, source], [t1, t2], [1.0, 1.0], alpha,
                                   _accuracies(store, setup, target, slots, [(k1, 1.0), (k2, 1.0)], alpha), [r1, r2]))
            for s1, s2 in permutations(sources, 2):
                (k1, r1), (k2, r2) = ops.real(target, s1, t1), ops.real(target, s2, t2)
                cells.append(_cell("generalization", "two_two_sources", target, [s1, s2], [t1, t2], [1.0, 1.0], alpha,
                                   _accuracies(store, setup, target, slots, [(k1, 1.0), (k2, 1.0)], alpha), [r1, r2]))
        store.drop_deltas(target)
    return cells


def alpha_sweep(setup: ExperimentSetup, store: FeatureStore, alphas: Iterable[float] = (0.25, 0.5, 0.75, 1.0),
                progress: bool = True) -> list[dict]:
    """Single-term cross-model additions (target x source != target x task) at each strength."""
    ops = Operators(setup, store)
    alphas = list(alphas)
    cells = []
    for target in track(list(setup.models), description="alpha sweep: targets", enabled=progress):
        for task in setup.tasks:
            slots = {"A": task}
            cells.append(_cell("alpha", "zero_shot", target, [], [task], [], 0.0, _accuracies(store, setup, target, slots, [], 0.0)))
            for source in (m for m in setup.models if m != target):
                key, r = ops.real(target, source, task)
                for alpha in alphas:
                    cells.append(_cell("alpha", "closed_form", target, [source], [task], [1.0], alpha,
                                       _accuracies(store, setup, target, slots, [(key, 1.0)], alpha), [r]))
        store.drop_deltas(target)
    return cells


WEIGHT_ALPHAS = tuple(round(0.1 * i, 1) for i in range(11))
# weight_space chooses alpha on at most this many items of each validation split (None: whole splits).
# On the world it binds on the two 26-class glyph tasks only (1,222 items each); measured there: the
# table within 0.15 points of whole splits, at two thirds of the time (docs/experiments.md).
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
    fine-tune cache, `experiments.sources`); their descriptors: baselines["finetunes"].descriptor when
    the setup has it, else setup.descriptors (a YAML setup's sources are its task vectors' fine-tunes).

    Speed: one working copy per target whose weights are set to theta + a tau in place; alpha 0 is the
    zero-shot features, encoded once per target; every evaluation encodes its sets in one batched pass.
    The time of each phase goes into report["timings"] and, with `log`, is printed as it ends.
    """
    from .ta_parts import Features, Variants, _aligned, _subset

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
    val = {t: _subset(setup.tasks[t].val, val_size) for t in tasks}
    test = {t: setup.tasks[t].test for t in tasks}
    controls = list(setup.controls.values())

    start = time.perf_counter()
    taus = {}
    for m in dict.fromkeys(src for src, _ in runs):
        taus.update({(m, t): tau for t, tau in _aligned({t: task_vector(m, t) for t in tasks}).items()})
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
                cells.append(_cell("weight_space", method, target, [source, source], [a_task, b_task], [1.0, 1.0], best, accuracy))
                if source == target:
                    cells.append(_cell("weight_space", "zero_shot", target, [], [a_task, b_task], [], 0.0,
                                       _accuracies(store, setup, target, slots, [], 0.0)))
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
                    cells.append(_cell("weight_space", "closed_form", target, [source, source], [a_task, b_task], [1.0, 1.0], alpha,
                                       _accuracies(store, setup, target, slots, terms, alpha), residuals))
                    _timed(timings, "closed form (descriptors, fast path)", start)
        if log is not None:
            log(f"weight_space: {target} done; so far " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
        store.drop_deltas(target)
    return cells
