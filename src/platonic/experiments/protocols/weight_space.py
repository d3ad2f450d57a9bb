"""The weight-space baselines of the paper's same-architecture table (method.md §1.7, §2), beside the
closed form on the same cells: classic task arithmetic within one model, weight-space transport of a
task vector to another model of the same architecture, and the two transports that change the vector
first, GradFix (Rinaldi et al. 2026, ICLR, arXiv 2510.09658) and Theseus (Rinaldi et al. 2026, arXiv
2602.12952) (`platonic.weight_transport`); alpha chosen on validation in all four.

Settings chosen here (the papers leave them to the user): GradFix's labelled images are
`GRADFIX_PER_CLASS` = 10 per class of the target's train split (a seeded draw, seed 0; the authors'
README example uses 10), its vote the per-image majority (their `sign_mode max`), its loss the
fine-tunes' own (the recipe's logit scale); Theseus' calibration inputs are each task's unlabelled
probes (the closed form's inputs), its maps one per module and side, not centred, not whitened.
Each task vector is moved on its own (GradFix: with its own task's gradient signs) and the two are summed.
"""

from __future__ import annotations

import time
from itertools import combinations, permutations
from typing import Callable

from ...data.probes import control_indices
from ...errors import InvalidInputError
from ...progress import track
from ...weight_transport import TheseusMaps, gradfix_mask, gradient_signs
from ..engine import ExperimentSetup, Features, FeatureStore, Variants, aligned, val_subset
from .paper import Operators, accuracies, cell_record

WEIGHT_ALPHAS = tuple(round(0.1 * i, 1) for i in range(11))
# weight_space chooses alpha on at most this many items of each validation split (None: whole splits).
# On the world it binds on the two 26-class glyph tasks only (1,222 items each); measured there: the
# table within 0.15 points of whole splits, at two thirds of the time (docs/lab/2026-12-02-weight-space-baselines.md).
WEIGHT_SPACE_VAL_SIZE = 500
GRADFIX_PER_CLASS = 10
GRADFIX_SEED = 0


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
    gradfix: theta_B + a (m_A * tau_A + m_B * tau_B), m_t GradFix's mask from the target's gradient signs on
    `GRADFIX_PER_CLASS` labelled train images per class of task t (setup.baselines["labelled"]; without it,
    no gradfix cells); theseus: theta_B + a (Th(tau_A) + Th(tau_B)), Th the Theseus transport with maps
    from the two pre-trained models' activations on task t's probes;
    task_arithmetic: theta_0 + a (tau_A + tau_B) within one model, on the transports' targets (so every
    row of the table is on the same targets; with no same-architecture pair, on every model). In all,
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
    labelled = setup.baselines.get("labelled")
    scale = sources.config(tasks[0], 0.0).logit_scale if sources is not None else None
    moved, notes = {}, {"gradfix_kept": {}, "theseus_zeroed_share": {}}

    def transported(method: str, source: str, target: str, task: str):
        """tau of (source, task) moved to `target` by GradFix or Theseus (cached per source, target, task)."""
        key = (method, source, target, task)
        if key not in moved:
            start = time.perf_counter()
            tau = taus[(source, task)]
            if method == "gradfix":
                if ("signs", target, task) not in moved:
                    inputs, labels = labelled(task)
                    idx = control_indices(labels, len(setup.tasks[task].prompts), GRADFIX_PER_CLASS, GRADFIX_SEED)
                    moved[("signs", target, task)] = gradient_signs(setup.models[target], inputs[idx], labels[idx],
                                                                    setup.tasks[task].prompts, names=list(tau.deltas),
                                                                    logit_scale=scale)
                moved[key] = gradfix_mask(tau, moved[("signs", target, task)])
                kept = sum(int(v.count_nonzero()) for v in moved[key].deltas.values())
                notes["gradfix_kept"][f"{source}->{target}/{task}"] = kept / max(1, sum(int(v.count_nonzero()) for v in tau.deltas.values()))
            else:
                maps = TheseusMaps(setup.models[source], setup.models[target], setup.tasks[task].probes)
                moved[key], report = maps.transport(tau)
                notes["theseus_zeroed_share"][f"{source}->{target}/{task}"] = report["zeroed_share"]
            _timed(timings, f"{method} (masks or maps)", start)
        return moved[key]

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

        def on_validation(method, source, a_task, b_task, tau):
            """The cell of theta + a tau, a chosen on the two tasks' validation splits, then the test splits."""
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
            return cell_record("weight_space", method, target, [source, source], [a_task, b_task], [1.0, 1.0], best, accuracy)

        for source in [s for s, t in runs if t == target]:
            for a_task, b_task in combinations(tasks, 2):
                slots = {"A": a_task, "B": b_task}
                tau = taus[(source, a_task)] + taus[(source, b_task)]
                cells.append(on_validation("task_arithmetic" if source == target else "weight_transport", source, a_task, b_task, tau))
                if source == target:
                    cells.append(cell_record("weight_space", "zero_shot", target, [], [a_task, b_task], [], 0.0,
                                       accuracies(store, setup, target, slots, [], 0.0)))
                    continue
                for method in ("gradfix", "theseus") if labelled is not None else ("theseus",):
                    moved_tau = transported(method, source, target, a_task) + transported(method, source, target, b_task)
                    cells.append(on_validation(method, source, a_task, b_task, moved_tau))
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
    if report is not None:
        report.setdefault("diagnostics", {})["weight_space"] = {
            **notes, "gradfix": {"per_class": GRADFIX_PER_CLASS, "seed": GRADFIX_SEED, "vote": "majority",
                                 "logit_scale": scale, "ran": labelled is not None},
            "theseus": {"calibration": "each task's probes", "maps": "per module and side, Procrustes, not centred"}}
    return cells
