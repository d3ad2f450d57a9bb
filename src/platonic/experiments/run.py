"""Run protocols on a setup and write the report directory (results.json, tables.md, plots)."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Sequence

from ..adapter import AdaptConfig
from ..descriptor import utc_now
from ..measurement import EmbeddingCache
from ..storage import atomic_write
from .adapter_cells import ADAPTER_PARTS
from .fastpath import FeatureStore, single_thread
from .protocols import FAST_PATH, PROTOCOLS, SLOW_PARTS, check_experiments
from .plots import clear_plots, write_plots
from .report import new_results, render_tables
from .setup import ExperimentSetup


def run_experiments(setup: ExperimentSetup, names: Sequence[str], out_dir=None, *, cache: EmbeddingCache | None = None,
                    progress: bool = True, plots: bool = True, diagnostics: dict | None = None,
                    adapter_cells: int = 0, adapter_config: AdaptConfig | None = None) -> dict:
    """Run the named protocols ("addition", "negation", "generalization", "alpha") and return results.

    Unknown or repeated names, and protocols the setup cannot run (generalization without a related
    group), are refused before any work.

    adapter_cells > 0 adds the adapter route on that many seeded cells of addition and of negation,
    beside the closed form on the same cells (`experiments.adapter_cells`; `adapter_config` sets the fit).
    Writes results.json, tables.md and plots into `out_dir` when given.
    """
    check_experiments(names, related_group=setup.related_group, held_out=setup.held_out, baselines=setup.baselines)
    store = FeatureStore(setup, cache=cache, progress=False)
    settings = {"experiments": list(names), "created": utc_now()}
    if adapter_cells:
        settings["adapter"] = {"cells": adapter_cells, **(adapter_config or AdaptConfig()).model_dump(mode="json")}
    results = new_results(setup.describe(), settings)
    t0 = time.perf_counter()
    store.prefetch(progress=progress)
    results["timings"]["caching features (forward passes)"] = time.perf_counter() - t0
    for name in names:
        start = time.perf_counter()
        fast = name in FAST_PATH
        with single_thread() if fast else nullcontext():
            cells = PROTOCOLS[name](setup, store, progress=progress)
        results["timings"][f"{name}{', fast path' if fast else ''} ({len(cells)} records)"] = time.perf_counter() - start
        if name in SLOW_PARTS:
            start = time.perf_counter()
            slow = SLOW_PARTS[name](setup, store, progress=progress)
            results["timings"][f"{name}, trained baselines ({len(slow)} records)"] = time.perf_counter() - start
            cells += slow
        if adapter_cells and name in ADAPTER_PARTS:
            start = time.perf_counter()
            fitted = ADAPTER_PARTS[name](setup, store, adapter_cells, adapter_config, progress=progress)
            results["timings"][f"{name}, adapter route ({len(fitted) // 3} cells)"] = time.perf_counter() - start
            cells += fitted
        results["cells"].extend(cells)
    results["timings"]["total"] = time.perf_counter() - t0
    results["diagnostics"].update(setup.diagnostics)
    if diagnostics:
        results["diagnostics"].update(diagnostics)
    if out_dir is not None:
        write_run(Path(out_dir), results, plots=plots)
    return results


def write_run(directory, results: dict, plots: bool = True) -> Path:
    """Write results.json, tables.md and (optionally) the plots into `directory` (created).

    Plots an earlier run left in the directory are removed first (only the files a run draws).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results, indent=1)  # insertion order kept: it is the column order of the tables
    atomic_write(directory / "results.json", lambda tmp: Path(tmp).write_text(text))
    tables = render_tables(results)
    atomic_write(directory / "tables.md", lambda tmp: Path(tmp).write_text(tables))
    clear_plots(directory)  # what an earlier run drew in this directory is stale now
    if plots:
        write_plots(directory, results)
    return directory
