"""The adapter route beside the closed form, on a seeded subset of the addition and negation cells.

Each chosen cell is evaluated three ways on exactly the same (target, sources, tasks):
zero-shot and closed form from the fast path, and the adapter fitted to the same descriptors
(`platonic.adapt`, c = +1 per term for addition, c = -1 for negation), merged into a copy of the
target and evaluated end to end. Records carry experiment "addition/adapter" or "negation/adapter"
so the main tables keep their full grids; the adapter record adds "fit" (steps, seconds, the
relative residual of every term). With `anchor_weight` > 0 (beyond the paper) the fit also keeps the
embeddings of unlabeled anchors drawn from the probes of the tasks the cell does not compose.
"""

from __future__ import annotations

import random
import time
from contextlib import nullcontext
from itertools import combinations

import torch

from ...adapter import AdaptConfig
from ...distributed import Job
from ...progress import track
from ..engine.adapter_cache import cached_adapt
from ..engine.fastpath import FeatureStore, accuracy_end_to_end, single_thread
from ..engine.setup import ExperimentSetup
from .paper import Operators, accuracies, cell_record

ADAPTER_CELL_SEED = 42


def _choose(candidates: list, n: int) -> list:
    """A seeded sample of n candidates, kept in grid order (all of them when n >= their number)."""
    if n >= len(candidates):
        return list(candidates)
    keep = set(random.Random(ADAPTER_CELL_SEED).sample(range(len(candidates)), n))
    return [c for i, c in enumerate(candidates) if i in keep]


ANCHORS_PER_TASK = 64


def anchor_pool(setup: ExperimentSetup, exclude) -> torch.Tensor:
    """Unlabeled anchors for `anchor_weight`: a seeded draw of 64 probes (train images) from every task not in
    `exclude` (never test or control images)."""
    gen = torch.Generator().manual_seed(ADAPTER_CELL_SEED)
    parts = []
    for name, task in setup.tasks.items():
        if name not in exclude:
            parts.append(task.probes[torch.randperm(len(task.probes), generator=gen)[:ANCHORS_PER_TASK]])
    return torch.cat(parts)


TINY_TOWER = 5_000_000  # parameters


def _is_tiny(model) -> bool:
    """Towers this small fit as fast on one thread, and two threads on two busy cores ran a world fit 7x slower
    (188 s vs 25 s, benchmarks/bench_adapter.py beside another job): fit them single-threaded."""
    return sum(p.numel() for p in model.tower.parameters()) < TINY_TOWER


def fit_adapted(setup: ExperimentSetup, store: FeatureStore, target: str, terms, config: AdaptConfig):
    """(edited copy of `target`, Adapter, seconds): the adapter fitted to `terms` [(c, source, task)], merged.

    The fit is kept in the adapter cache (`engine.adapter_cache`): fitted once, by whichever process of a
    launch ran its job, or by an earlier run."""
    pairs, probes = [], {}
    for c, source, task in terms:
        desc = setup.descriptors[(source, task)]
        pairs.append((c, desc))
        probes[desc.grid.probe_digest] = setup.tasks[task].probes
    anchors = anchor_pool(setup, [task for _, _, task in terms]) if config.anchor_weight else None
    start = time.perf_counter()
    with single_thread() if _is_tiny(setup.models[target]) else nullcontext():
        adapter, _ = cached_adapt(setup.models[target], pairs, config=config, probes=probes, cache=store.cache,
                                  anchors=anchors)
    edited = setup.models[target].copy_for_new_weights()
    adapter.merge_into(edited)
    return edited, adapter, time.perf_counter() - start


def _fit_and_evaluate(setup: ExperimentSetup, store: FeatureStore, target: str, terms, slots: dict, config: AdaptConfig):
    """(test accuracies, fit record, residuals) of the adapter fitted to `terms` on `target`."""
    edited, adapter, seconds = fit_adapted(setup, store, target, terms, config)
    sets = {**{slot: setup.tasks[task].test for slot, task in slots.items()}, **setup.controls}
    accuracy = {name: accuracy_end_to_end(edited, s, store.cache) for name, s in sets.items()}
    fit = {"steps": adapter.report["steps"], "chosen_step": adapter.report["chosen_step"], "seconds": round(seconds, 3),
           "relative_residual": adapter.report["relative_residual"]}
    return accuracy, fit, list(adapter.report["relative_residual"].values())


def addition_cells(setup: ExperimentSetup, cells: int) -> list[tuple[str, str, str, str, str]]:
    """(target, source of A, source of B, task A, task B) of the seeded cross-model addition cells the adapter fits."""
    candidates = [(t, sa, sb, a, b) for t in setup.models for a, b in combinations(setup.tasks, 2)
                  for sa in setup.models if sa != t for sb in setup.models if sb != t]
    return _choose(candidates, cells)


def negation_cells(setup: ExperimentSetup, cells: int) -> list[tuple[str, str, str]]:
    """(target, source, task) of the seeded cross-model negation cells the adapter fits."""
    candidates = [(t, s, task) for t in setup.models for task in setup.tasks for s in setup.models if s != t]
    return _choose(candidates, cells)


def _cell_job(setup: ExperimentSetup, store: FeatureStore, target: str, terms, slots: dict, config: AdaptConfig) -> Job:
    """Fit one cell's adapter into the cache and encode its evaluation sets (a job of a launch)."""
    label = " ".join(f"{c:+g}*{task}@{source}" for c, source, task in terms)

    def run() -> str:
        _fit_and_evaluate(setup, store, target, terms, slots, config)
        return "fitted and evaluated"

    return Job(f"adapter cell {target} <- {label}", run)


def addition_adapter_jobs(setup: ExperimentSetup, store: FeatureStore, cells: int, config: AdaptConfig | None = None) -> list[Job]:
    """One job per adapter cell of `addition_adapter` (a launch spreads them over its processes)."""
    config = config or AdaptConfig()
    return [_cell_job(setup, store, t, [(1.0, sa, a), (1.0, sb, b)], {"A": a, "B": b}, config)
            for t, sa, sb, a, b in addition_cells(setup, cells)]


def negation_adapter_jobs(setup: ExperimentSetup, store: FeatureStore, cells: int, config: AdaptConfig | None = None) -> list[Job]:
    """One job per adapter cell of `negation_adapter`."""
    config = config or AdaptConfig()
    return [_cell_job(setup, store, t, [(-1.0, s, task)], {"A": task}, config) for t, s, task in negation_cells(setup, cells)]


def addition_adapter(setup: ExperimentSetup, store: FeatureStore, cells: int, config: AdaptConfig | None = None,
                     alpha: float = 0.5, progress: bool = True) -> list[dict]:
    """Zero-shot, closed form (alpha) and adapter (c = +1, +1) on `cells` seeded cross-model addition cells."""
    config = config or AdaptConfig()
    ops = Operators(setup, store)
    out = []
    for target, sa, sb, a, b in track(addition_cells(setup, cells), description="addition: adapter cells", enabled=progress):
        slots = {"A": a, "B": b}
        (ka, ra), (kb, rb) = ops.real(target, sa, a), ops.real(target, sb, b)
        out.append(cell_record("addition/adapter", "zero_shot", target, [], [a, b], [], 0.0,
                         accuracies(store, setup, target, slots, [], 0.0)))
        out.append(cell_record("addition/adapter", "closed_form", target, [sa, sb], [a, b], [1.0, 1.0], alpha,
                         accuracies(store, setup, target, slots, [(ka, 1.0), (kb, 1.0)], alpha), [ra, rb]))
        accuracy, fit, residuals = _fit_and_evaluate(setup, store, target, [(1.0, sa, a), (1.0, sb, b)], slots, config)
        out.append({**cell_record("addition/adapter", "adapter", target, [sa, sb], [a, b], [1.0, 1.0], None, accuracy, residuals),
                    "fit": fit})
    return out


def negation_adapter(setup: ExperimentSetup, store: FeatureStore, cells: int, config: AdaptConfig | None = None,
                     alpha: float = 1.0, progress: bool = True) -> list[dict]:
    """Zero-shot, closed form (c = -1 at alpha) and adapter (c = -1) on `cells` seeded cross-model negation cells."""
    config = config or AdaptConfig()
    ops = Operators(setup, store)
    out = []
    for target, source, task in track(negation_cells(setup, cells), description="negation: adapter cells", enabled=progress):
        slots = {"A": task}
        key, r = ops.real(target, source, task)
        out.append(cell_record("negation/adapter", "zero_shot", target, [], [task], [], 0.0,
                         accuracies(store, setup, target, slots, [], 0.0)))
        out.append(cell_record("negation/adapter", "closed_form", target, [source], [task], [-1.0], alpha,
                         accuracies(store, setup, target, slots, [(key, -1.0)], alpha), [r]))
        accuracy, fit, residuals = _fit_and_evaluate(setup, store, target, [(-1.0, source, task)], slots, config)
        out.append({**cell_record("negation/adapter", "adapter", target, [source], [task], [-1.0], None, accuracy, residuals),
                    "fit": fit})
    return out

