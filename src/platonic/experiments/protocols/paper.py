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

Sources (`sources=`, beyond the paper; addition and negation): "single" (each other model's descriptor,
the paper's cells), "consensus" (one source per target and task: the mean of the K = T - 1 other
models' descriptors of the task, `platonic.mean`, method "consensus"), or "both". The run's
diagnostics then hold each kind's mean cosine to the target's own descriptor of the task.

Each is one entry of `experiments.registry.PROTOCOLS`, with its defaults, methods, labels and reference.
"""

from __future__ import annotations

from itertools import combinations, permutations
from typing import Callable, Iterable, Sequence

from ...descriptor import mean
from ...errors import InvalidInputError
from ...progress import track
from ..engine.fastpath import FeatureStore, accuracy_end_to_end
from ..engine.setup import ExperimentSetup

RANDOM_SEED = 42
SOURCE_CHOICES = ("single", "consensus", "both")
CONSENSUS = "consensus"


def _random_seed(setup: ExperimentSetup, source: str, task: str) -> int:
    """A fixed seed per (source, task), so the random baseline is the same descriptor in every cell."""
    return RANDOM_SEED + 1000 * list(setup.models).index(source) + list(setup.tasks).index(task)


def source_names(setup: ExperimentSetup, target: str, sources: str = "single") -> list[str]:
    """The sources of a cell on `target`: the other models ("single"), `CONSENSUS`, or both."""
    if sources not in SOURCE_CHOICES:
        raise InvalidInputError(f"sources is one of {', '.join(SOURCE_CHOICES)}; got {sources!r}")
    singles = [m for m in setup.models if m != target]
    return {"single": singles, "consensus": [CONSENSUS], "both": [*singles, CONSENSUS]}[sources]


def consensus_descriptor(setup: ExperimentSetup, target: str, task: str):
    """The mean of every other model's descriptor of `task` (they share the task's probes and prompts)."""
    others = [m for m in setup.models if m != target]
    if not others:
        raise InvalidInputError("a consensus of sources needs a model other than the target")
    return mean(setup.descriptors[(m, task)] for m in others)


def consensus_cosines(setup: ExperimentSetup) -> dict:
    """Per task: the mean cosine to the target's own descriptor of the consensus and of a single source."""
    out = {}
    for task in setup.tasks:
        cons, single = [], []
        for target in setup.models:
            own = setup.descriptors[(target, task)]
            cons.append(consensus_descriptor(setup, target, task).cosine(own))
            single += [setup.descriptors[(m, task)].cosine(own) for m in setup.models if m != target]
        out[task] = {"consensus": sum(cons) / len(cons), "single": sum(single) / len(single)}
    return out


class Operators:
    """Keys for the operators a cell uses: ("real", source, task), ("random", source, task), and for the
    consensus source ("consensus", target, task)."""

    def __init__(self, setup: ExperimentSetup, store: FeatureStore):
        self.setup, self.store = setup, store

    def real(self, target: str, source: str, task: str):
        if source == CONSENSUS:
            key = (CONSENSUS, target, task)
            return key, self.store.operator(target, key, consensus_descriptor(self.setup, target, task)).residual
        key = ("real", source, task)
        op = self.store.operator(target, key, self.setup.descriptors[(source, task)])
        return key, op.residual

    def random(self, target: str, source: str, task: str):
        key = ("random", source, task)
        desc = self.setup.descriptors[(source, task)]
        op = self.store.operator(target, key, desc.random_like(_random_seed(self.setup, source, task)))
        return key, op.residual


def accuracies(store: FeatureStore, setup: ExperimentSetup, target: str, slots: dict, terms, alpha: float) -> dict:
    sets = {**{slot: setup.tasks[task].test for slot, task in slots.items()}, **setup.controls}
    return {name: store.accuracy(target, eval_set, terms, alpha) for name, eval_set in sets.items()}


def cell_record(experiment, method, target, sources, tasks, coefficients, alpha, accuracy, residuals=()) -> dict:
    return {"experiment": experiment, "method": method, "target": target, "sources": list(sources),
            "tasks": list(tasks), "coefficients": list(coefficients), "alpha": alpha,
            "accuracy": accuracy, "residuals": [round(r, 6) for r in residuals]}


def _note_consensus(setup: ExperimentSetup, sources: str, report: dict | None) -> None:
    if sources != "single" and report is not None:
        report.setdefault("diagnostics", {})["consensus_cosine"] = consensus_cosines(setup)


def addition(setup: ExperimentSetup, store: FeatureStore, alpha: float = 0.5, progress: bool = True, sources: str = "single",
             report: dict | None = None, log=None) -> list[dict]:
    ops = Operators(setup, store)
    cells = []
    pairs = list(combinations(setup.tasks, 2))
    for target in track(list(setup.models), description="addition: targets", enabled=progress):
        names = source_names(setup, target, sources)
        for a, b in pairs:
            slots = {"A": a, "B": b}
            cells.append(cell_record("addition", "zero_shot", target, [], [a, b], [], 0.0, accuracies(store, setup, target, slots, [], 0.0)))
            (ka, ra), (kb, rb) = ops.real(target, target, a), ops.real(target, target, b)
            cells.append(cell_record("addition", "oracle", target, [target, target], [a, b], [1, 1], alpha,
                               accuracies(store, setup, target, slots, [(ka, 1.0), (kb, 1.0)], alpha), [ra, rb]))
            if CONSENSUS in names:
                (ka, ra), (kb, rb) = ops.real(target, CONSENSUS, a), ops.real(target, CONSENSUS, b)
                cells.append(cell_record("addition", "consensus", target, [CONSENSUS, CONSENSUS], [a, b], [1, 1], alpha,
                                   accuracies(store, setup, target, slots, [(ka, 1.0), (kb, 1.0)], alpha), [ra, rb]))
            singles = [m for m in names if m != CONSENSUS]
            for sa in singles:
                for sb in singles:
                    (ka, ra), (kb, rb) = ops.real(target, sa, a), ops.real(target, sb, b)
                    (qa, xa), (qb, xb) = ops.random(target, sa, a), ops.random(target, sb, b)
                    for method, terms, residuals in (
                        ("closed_form", [(ka, 1.0), (kb, 1.0)], [ra, rb]),
                        ("single_a", [(ka, 1.0)], [ra]),
                        ("single_b", [(kb, 1.0)], [rb]),
                        ("random", [(qa, 1.0), (qb, 1.0)], [xa, xb]),
                    ):
                        cells.append(cell_record("addition", method, target, [sa, sb], [a, b], [c for _, c in terms], alpha,
                                           accuracies(store, setup, target, slots, terms, alpha), residuals))
        store.drop_deltas(target)
    _note_consensus(setup, sources, report)
    return cells


NEGATION_BASELINES = ("target_as_source", "gradient_ascent")  # beside the closed form; --baselines chooses


def negation(setup: ExperimentSetup, store: FeatureStore, alpha: float = 1.0, progress: bool = True, sources: str = "single",
             baselines: Sequence[str] = NEGATION_BASELINES, report: dict | None = None, log=None) -> list[dict]:
    """Negation cells; `sources` single, consensus or both (as `addition`); `baselines` (of NEGATION_BASELINES)
    says which baselines run beside the closed form (gradient ascent runs in `negation_gradient_ascent`,
    after the fast path)."""
    ops = Operators(setup, store)
    cells = []
    for target in track(list(setup.models), description="negation: targets", enabled=progress):
        names = source_names(setup, target, sources)
        for task in setup.tasks:
            slots = {"A": task}
            cells.append(cell_record("negation", "zero_shot", target, [], [task], [], 0.0, accuracies(store, setup, target, slots, [], 0.0)))
            if "target_as_source" in baselines:
                key, r = ops.real(target, target, task)
                cells.append(cell_record("negation", "target_as_source", target, [target], [task], [-1.0], alpha,
                                   accuracies(store, setup, target, slots, [(key, -1.0)], alpha), [r]))
            for source in names:
                key, r = ops.real(target, source, task)
                cells.append(cell_record("negation", "consensus" if source == CONSENSUS else "closed_form", target, [source],
                                   [task], [-1.0], alpha, accuracies(store, setup, target, slots, [(key, -1.0)], alpha), [r]))
        store.drop_deltas(target)
    _note_consensus(setup, sources, report)
    return cells


def negation_gradient_ascent(setup: ExperimentSetup, store: FeatureStore, progress: bool = True,
                             baselines: Sequence[str] = NEGATION_BASELINES, ascent_steps: int | None = None) -> list[dict]:
    """The labelled gradient-ascent baseline of the negation table, when the setup provides it and
    `baselines` names it; `ascent_steps`: its budget (None: the setup's own, 20 steps on the worlds and
    YAML setups).

    It trains every (target, task), so it runs outside the fast path (and with all threads); the edited
    models' embeddings go through the store's embedding cache (a second run with the same edits
    encodes nothing).
    """
    ascend: Callable | None = setup.baselines.get("gradient_ascent")
    if ascend is None or "gradient_ascent" not in baselines:
        return []
    cells = []
    pairs = [(t, k) for t in setup.models for k in setup.tasks]
    for target, task in track(pairs, description="negation: gradient ascent", enabled=progress):
        edited = ascend(target, task) if ascent_steps is None else ascend(target, task, steps=ascent_steps)
        sets = {"A": setup.tasks[task].test, **setup.controls}
        cells.append(cell_record("negation", "gradient_ascent", target, [], [task], [], 0.0,
                           {name: accuracy_end_to_end(edited, s, store.cache) for name, s in sets.items()}))
    return cells


def gradient_ascent_jobs(setup: ExperimentSetup, store: FeatureStore) -> list:
    """One job per (target, task) of `negation_gradient_ascent`: train the baseline and encode its evaluation
    sets into the store's embedding cache (a launch spreads them; the baseline then reads them back)."""
    from ...distributed import Job

    ascend: Callable | None = setup.baselines.get("gradient_ascent")
    if ascend is None:
        return []

    def job(target: str, task: str):
        def run() -> str:
            edited = ascend(target, task)
            for s in (setup.tasks[task].test, *setup.controls.values()):
                accuracy_end_to_end(edited, s, store.cache)
            return "trained and evaluated"

        return Job(f"gradient ascent {target}/{task}", run)

    return [job(t, k) for t in setup.models for k in setup.tasks]


def generalization(setup: ExperimentSetup, store: FeatureStore, alpha: float = 0.5, progress: bool = True) -> list[dict]:
    """Operators of the related group's tasks applied to the held-out related task (no operator of its own)."""
    if not setup.related_group or setup.held_out is None:
        return []
    ops = Operators(setup, store)
    held, group = setup.held_out, list(setup.related_group)
    cells = []
    for target in track(list(setup.models), description="generalization: targets", enabled=progress):
        slots = {"A": held}
        cells.append(cell_record("generalization", "zero_shot", target, [], [held], [], 0.0, accuracies(store, setup, target, slots, [], 0.0)))
        sources = [m for m in setup.models if m != target]
        for source in sources:
            for task in group:
                key, r = ops.real(target, source, task)
                cells.append(cell_record("generalization", "one_operator", target, [source], [task], [1.0], alpha,
                                   accuracies(store, setup, target, slots, [(key, 1.0)], alpha), [r]))
        for t1, t2 in combinations(group, 2):
            for source in sources:
                (k1, r1), (k2, r2) = ops.real(target, source, t1), ops.real(target, source, t2)
                cells.append(cell_record("generalization", "two_one_source", target, [source, source], [t1, t2], [1.0, 1.0], alpha,
                                   accuracies(store, setup, target, slots, [(k1, 1.0), (k2, 1.0)], alpha), [r1, r2]))
            for s1, s2 in permutations(sources, 2):
                (k1, r1), (k2, r2) = ops.real(target, s1, t1), ops.real(target, s2, t2)
                cells.append(cell_record("generalization", "two_two_sources", target, [s1, s2], [t1, t2], [1.0, 1.0], alpha,
                                   accuracies(store, setup, target, slots, [(k1, 1.0), (k2, 1.0)], alpha), [r1, r2]))
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
            cells.append(cell_record("alpha", "zero_shot", target, [], [task], [], 0.0, accuracies(store, setup, target, slots, [], 0.0)))
            for source in (m for m in setup.models if m != target):
                key, r = ops.real(target, source, task)
                for alpha in alphas:
                    cells.append(cell_record("alpha", "closed_form", target, [source], [task], [1.0], alpha,
                                       accuracies(store, setup, target, slots, [(key, 1.0)], alpha), [r]))
        store.drop_deltas(target)
    return cells
