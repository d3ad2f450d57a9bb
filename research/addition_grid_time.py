"""Time the world's addition grid (the fast path, 17,136 cells) in whichever tree PYTHONPATH names.

For docs/lab/2026-12-04-default-path-speed.md: a warm setup (negation first fills the descriptors and the
feature cache), then `run_experiments(setup, ["addition"])` timed. Runs against older trees too (before
issue 32 the world setup was `platonic.experiments.world_setup`). Alternate trees with
research/default_path_ab.sh.

    PYTHONPATH=src .venv/bin/python research/addition_grid_time.py LABEL
"""

import importlib
import os
import sys
import time

os.environ.setdefault("PLATONIC_QUIET", "1")
from platonic.experiments import run_experiments  # noqa: E402

try:
    from platonic.experiments.setups import world_setup
except ImportError:  # a tree from before issue 32
    world_setup = importlib.import_module("platonic.experiments.world_setup").world_setup

setup = world_setup(progress=False)
run_experiments(setup, ["negation"], None, progress=False, plots=False)
t0 = time.perf_counter()
results = run_experiments(setup, ["addition"], None, progress=False, plots=False)
print(f"{sys.argv[1] if len(sys.argv) > 1 else 'this tree'}: addition {time.perf_counter() - t0:.2f} s, "
      f"{len(results['cells'])} cells")
