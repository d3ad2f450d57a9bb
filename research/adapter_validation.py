"""Choose the adapter's fit on the world's *validation* splits (never test): candidates side by side.

For seeded cross-model addition and negation cells (seed 7, not the reporting seed), each candidate
AdaptConfig is fitted and evaluated on the validation split of the cell's task(s) and, for locality,
on the validation splits of every other task; the closed form on the same cells is the reference.

    python research/adapter_validation.py [--setup world|trunk-world] [--cells 6] [--candidates paper,lr1e-3,...]
"""

from __future__ import annotations

import argparse
import random
from contextlib import nullcontext
from itertools import combinations

from platonic import AdaptConfig
from platonic.experiments.protocols import fit_adapted
from platonic.experiments.engine import FeatureStore, accuracy_end_to_end, single_thread
from platonic.experiments.protocols import Operators
from platonic.experiments.setups import trunk_world_setup, world_setup

CANDIDATES = {
    "paper": AdaptConfig(),
    "lr1e-3": AdaptConfig(lr=1e-3),
    "lr3e-3": AdaptConfig(lr=3e-3),
    "lr1e-3-holdout": AdaptConfig(lr=1e-3, holdout=0.2),
    "lr3e-3-holdout": AdaptConfig(lr=3e-3, holdout=0.2),
    "lr3e-3-anchor10": AdaptConfig(lr=3e-3, anchor_weight=10.0),  # beyond the paper: keep other tasks' probes
    "lr1e-3-anchor10": AdaptConfig(lr=1e-3, anchor_weight=10.0),
    "lr1e-4": AdaptConfig(lr=1e-4),
    "lr3e-4-holdout": AdaptConfig(holdout=0.2),
    "lr3e-4-anchor10": AdaptConfig(anchor_weight=10.0),
}
SETUPS = {"world": world_setup, "trunk-world": trunk_world_setup}


def evaluate_adapter(setup, store, target, terms, config):
    """(validation accuracy of every task, seconds, fit report) of the adapter fitted as the experiments do."""
    edited, adapter, seconds = fit_adapted(setup, store, target, terms, config)
    return {t: accuracy_end_to_end(edited, setup.tasks[t].val) for t in setup.tasks}, seconds, adapter.report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--setup", choices=tuple(SETUPS), default="world")
    parser.add_argument("--cells", type=int, default=6)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--skip", type=int, default=0, help="skip the first N cells (resume a run)")
    args = parser.parse_args()
    # the tiny towers on one thread: two threads on two busy cores ran a fit 7x slower (measured)
    with single_thread() if args.setup == "world" else nullcontext():
        run(args)


def run(args) -> None:
    setup = SETUPS[args.setup](progress=False)
    store = FeatureStore(setup)
    ops = Operators(setup, store)
    rng = random.Random(7)
    add = [(t, sa, sb, a, b) for t in setup.models for a, b in combinations(setup.tasks, 2)
           for sa in setup.models if sa != t for sb in setup.models if sb != t]
    neg = [(t, s, k) for t in setup.models for k in setup.tasks for s in setup.models if s != t]
    cells = [("addition", c) for c in rng.sample(add, args.cells)] + [("negation", c) for c in rng.sample(neg, args.cells)]
    val = {t: setup.tasks[t].val for t in setup.tasks}
    rows = {}
    for kind, cell in cells[args.skip:]:
        if kind == "addition":
            target, sa, sb, a, b = cell
            terms, own, alpha = [(1.0, sa, a), (1.0, sb, b)], [a, b], 0.5
        else:
            target, s, k = cell
            terms, own, alpha = [(-1.0, s, k)], [k], 1.0
        keys = [(ops.real(target, src, task)[0], c) for c, src, task in terms]
        zero = {t: store.accuracy(target, val[t]) for t in setup.tasks}
        closed = {t: store.accuracy(target, val[t], keys, alpha) for t in setup.tasks}
        entries = {"closed_form": (closed, 0.0, None)}
        for name in args.candidates.split(","):
            entries[name] = evaluate_adapter(setup, store, target, terms, CANDIDATES[name])
        for name, (acc, seconds, report) in entries.items():
            own_gain = sum(acc[t] - zero[t] for t in own) / len(own)
            others = [t for t in setup.tasks if t not in own]
            other_change = sum(acc[t] - zero[t] for t in others) / len(others)
            rows.setdefault((kind, name), []).append((own_gain, other_change, seconds,
                                                      None if report is None else report["chosen_step"]))
        print(f"{kind} {cell}: " + "; ".join(f"{n} own {100 * rows[(kind, n)][-1][0]:+.1f} other {100 * rows[(kind, n)][-1][1]:+.1f}"
                                            for n in entries), flush=True)
    print("\n| cells | method | own task(s), val change (points) | other tasks, val change | seconds per fit |")
    print("|---|---|---|---|---|")
    for (kind, name), values in rows.items():
        n = len(values)
        print(f"| {kind} x{n} | {name} | {100 * sum(v[0] for v in values) / n:+.2f} | {100 * sum(v[1] for v in values) / n:+.2f} "
              f"| {sum(v[2] for v in values) / n:.1f} |")


if __name__ == "__main__":
    main()
