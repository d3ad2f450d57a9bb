"""Run protocols on a setup and write the report directory (results.json, tables.md, plots)."""

from __future__ import annotations

import inspect
import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Sequence

from .._checks import as_finite_scalar
from ..adapt_config import AdaptConfig
from ..compute import DEFAULT as DEFAULT_COMPUTE
from ..compute import active as active_compute
from ..descriptor import utc_now
from ..distributed import current, launch_size, on_main, solo, spread
from ..environment import cpu_record, library_versions
from ..errors import InvalidInputError
from ..hashing import remembered_digests
from ..measurement import EmbeddingCache
from ..preflight import check_writable_directory
from ..solve_config import SolveConfig
from ..storage import atomic_write
from .engine import ExperimentSetup, FeatureStore, phase_one, single_thread
from .plots import clear_plots, write_plots
from .registry import PROTOCOLS, check_experiments
from .report import load_results, new_results, render_tables


@remembered_digests()  # the probes are named again by every measurement: hash each once
def run_experiments(setup: ExperimentSetup, names: Sequence[str], out_dir=None, *, alpha: float | None = None,
                    solve: SolveConfig | None = None, cache: EmbeddingCache | None = None, progress: bool = True,
                    plots: bool = True, diagnostics: dict | None = None, adapter_cells: int = 0,
                    adapter_config: AdaptConfig | None = None, anchor_images=None, trained_baselines: bool = True,
                    options: dict | None = None, log=None) -> dict:
    """Run the named protocols (`registry.PROTOCOLS`: "addition", "negation", ...) and return results.

    A standalone protocol (task_arithmetic) runs alone on its own setup (a `setups.TaskArithmeticSetup`),
    with its runner's options in `options` (e.g. {"task_arithmetic": {"flavours": ["full"]}}).

    Unknown or repeated names, and protocols the setup cannot run (generalization without a related
    group), are refused before any work.

    alpha: the fold strength of every named protocol that folds at one strength (default: each
    registry entry's own, 0.5 for addition, 1.0 for negation); solve: how the closed form is solved,
    the ridge weights, "paper" | "anchored", a rank cap (`platonic.SolveConfig`; default: each entry's). Both are
    recorded in the results' settings, per experiment. anchor_images: the anchored solve's pool
    (default: each task's from the other tasks' probes). trained_baselines=False skips the baselines
    that train (gradient ascent), e.g. for a second run that only changes the solve.
    adapter_cells > 0 adds the adapter route on that many seeded cells of addition and of negation,
    beside the closed form on the same cells (`experiments.adapter_cells`; `adapter_config` sets the fit).
    options: {experiment: {option: value}} for the runners' own options (a registry entry's `options`,
    e.g. {"weight_space": {"val_size": 200}}), recorded in settings.protocols; log: a line printer for
    the phase times of the runners that report them (weight_space, orthoreg_sources).
    Writes results.json, tables.md and plots into `out_dir` when given.

    In a launch of several processes (`platonic.distributed`) the run's independent jobs (features,
    descriptors, cached fine-tunes, gradient-ascent baselines, adapter cells: `engine.jobs`) are spread
    over the processes first; then the main process runs the experiments as one process would, reading
    everything from the caches, and writes the run; every process returns its results.
    """
    group = current()
    if group.parallel:
        arguments = dict(alpha=alpha, solve=solve, cache=cache, progress=progress, plots=plots, diagnostics=diagnostics,
                         adapter_cells=adapter_cells, adapter_config=adapter_config, anchor_images=anchor_images,
                         trained_baselines=trained_baselines, options=options, log=log)
        _spread_jobs(setup, names, arguments)

        def alone() -> dict:
            with solo():
                return run_experiments(setup, names, out_dir, **arguments)

        return group.agree(on_main(alone))
    check_experiments(names)
    options = {name: dict(opts) for name, opts in (options or {}).items() if opts}
    for name, opts in options.items():
        stray = [k for k in opts if name not in names or k not in PROTOCOLS[name].options]
        if stray:
            raise InvalidInputError(f"option(s) {', '.join(stray)} do not apply to {name}"
                                    + ("" if name in names else " (not among the experiments run)"))
    if PROTOCOLS[names[0]].standalone:
        return _run_standalone(PROTOCOLS[names[0]], setup, out_dir, options.get(names[0], {}), progress, plots, log)
    check_experiments(names, related_group=setup.related_group, held_out=setup.held_out, baselines=setup.baselines)
    alpha = None if alpha is None else as_finite_scalar("alpha", alpha)
    if alpha == 0:
        raise InvalidInputError("alpha 0 is no edit: every cell would be the zero-shot model; give a strength, e.g. 0.5")
    protocols = [PROTOCOLS[name] for name in names]
    if alpha is not None and all(p.alpha is None for p in protocols):
        raise InvalidInputError(f"alpha does not apply to {', '.join(names)} (the sweep has its own strengths)")
    chosen = {p.name: (p.alpha if alpha is None or p.alpha is None else alpha, solve or p.solve) for p in protocols}
    settings = {"experiments": list(names), "created": utc_now(), "environment": {"versions": library_versions(), "cpu": cpu_record()},
                "protocols": {name: {"alpha": a, **s.model_dump(mode="json"), **_option_defaults(PROTOCOLS[name]), **options.get(name, {})}
                              for name, (a, s) in chosen.items()}}
    if not trained_baselines:
        settings["trained_baselines"] = False
    if adapter_cells:
        settings["adapter"] = {"cells": adapter_cells, **(adapter_config or AdaptConfig()).model_dump(mode="json")}
    launch = {**active_compute().model_dump(mode="json", exclude={"device"}), "processes": launch_size()}
    if launch != {**DEFAULT_COMPUTE.model_dump(mode="json", exclude={"device"}), "processes": 1}:  # where not the default
        settings["compute"] = launch
    results = new_results(setup.describe(), settings)
    t0 = time.perf_counter()
    stores: dict[SolveConfig, FeatureStore] = {}
    for _, ridge in chosen.values():
        if ridge not in stores:
            pool = anchor_images if ridge.kind == "anchored" else None
            stores[ridge] = FeatureStore(setup, cache=cache, progress=False, solve=ridge, anchor_images=pool)
            stores[ridge].prefetch(progress=progress)
    results["timings"]["caching features (forward passes)"] = time.perf_counter() - t0
    for protocol in protocols:
        name, (strength, ridge) = protocol.name, chosen[protocol.name]
        store = stores[ridge]
        strength_arg = {} if strength is None else {"alpha": strength}
        extra = taken_options(protocol.runner, options.get(name, {}))
        report: dict = {"timings": {}, "diagnostics": {}}
        if protocol.reports:
            extra.update(report=report, log=log)
        start = time.perf_counter()
        with single_thread() if protocol.fast_path else nullcontext():
            cells = protocol.runner(setup, store, progress=progress, **strength_arg, **extra)
        results["timings"].update({f"{name}: {phase}": secs for phase, secs in report["timings"].items()})
        results["diagnostics"].update(report["diagnostics"])
        results["timings"][f"{name}{', fast path' if protocol.fast_path else ''} ({len(cells)} records)"] = time.perf_counter() - start
        if protocol.slow_part is not None and trained_baselines:
            start = time.perf_counter()
            slow = protocol.slow_part(setup, store, progress=progress,
                                      **taken_options(protocol.slow_part, options.get(name, {})))
            results["timings"][f"{name}, trained baselines ({len(slow)} records)"] = time.perf_counter() - start
            cells += slow
        if adapter_cells and protocol.adapter_part is not None:
            start = time.perf_counter()
            fitted = protocol.adapter_part(setup, store, adapter_cells, adapter_config, progress=progress, **strength_arg)
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


def _spread_jobs(setup, names: Sequence[str], arguments: dict) -> None:
    """Phase one (features, descriptors, cached fine-tunes, trained baselines), then the protocols' adapter
    cells (they need the descriptors), spread over the launch's processes (`engine.jobs`)."""
    check_experiments(names)
    protocols = [PROTOCOLS[name] for name in names]
    say, options = arguments["log"], arguments["options"] or {}
    if protocols[0].standalone:
        jobs = protocols[0].jobs(setup, **options.get(names[0], {})) if protocols[0].jobs is not None else []
        spread(jobs, say)
        return
    stores = {}
    for protocol in protocols:
        ridge = arguments["solve"] or protocol.solve
        if ridge not in stores:
            pool = arguments["anchor_images"] if ridge.kind == "anchored" else None
            stores[ridge] = FeatureStore(setup, cache=arguments["cache"], solve=ridge, anchor_images=pool)
    lambdas = {0.0}
    for protocol in protocols:
        if protocol.fine_tunes and "lambdas" in protocol.options:
            lambdas.update((options.get(protocol.name) or {}).get("lambdas") or _option_defaults(protocol)["lambdas"])
    fine_tunes = sorted(lambdas) if any(p.fine_tunes for p in protocols) else None
    first = [job for store in stores.values() for job in phase_one(store, fine_tunes)]
    if arguments["trained_baselines"]:
        first += [job for p in protocols if p.slow_jobs for job in p.slow_jobs(setup, next(iter(stores.values())))]
    spread(list({job.name: job for job in first}.values()), say)
    cells, config = arguments["adapter_cells"], arguments["adapter_config"]
    if cells:
        store = next(iter(stores.values()))
        spread([job for p in protocols if p.adapter_jobs for job in p.adapter_jobs(setup, store, cells, config)], say)


def _run_standalone(protocol, setup, out_dir, options: dict, progress: bool, plots: bool, log) -> dict:
    """A standalone experiment (task_arithmetic): its runner on its own setup, as a run directory."""
    start = time.perf_counter()
    out = protocol.runner(setup, **options, progress=progress, log=log)
    results = new_results(setup.describe(), {"experiments": [protocol.name], "created": utc_now(),
                                             protocol.name: out["settings"]})
    results["cells"] = out["cells"]
    results["timings"] = {**out["timings"], "total": time.perf_counter() - start}
    results["diagnostics"] = out["diagnostics"]
    if out_dir is not None:
        write_run(Path(out_dir), results, plots=plots)
    return results


def taken_options(function, options: dict) -> dict:
    """The protocol options that `function` (a runner or a slow part) takes, by its signature: an option such
    as negation's `baselines` goes to both, `ascent_steps` to the slow part alone."""
    parameters = inspect.signature(function).parameters
    return {k: v for k, v in options.items() if k in parameters}


BASELINE_OPTIONS = ("baselines", "ascent_steps")  # recorded when given; by default every baseline runs, as before


def _option_defaults(protocol) -> dict:
    """The runner's own defaults of the options a protocol takes (so results.json records what ran)."""
    parameters = inspect.signature(protocol.runner).parameters
    return {k: parameters[k].default for k in protocol.options if k in parameters and k not in BASELINE_OPTIONS
            and parameters[k].default is not inspect.Parameter.empty}


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


def rerender_run(directory, plots: bool = True) -> Path:
    """`platonic report DIR`: a run's tables (and plots) written again from its results.json alone."""
    results = load_results(directory)
    check_writable_directory(directory, f"the report into {directory}")
    return write_run(Path(directory), results, plots=plots)
