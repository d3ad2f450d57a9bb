"""`platonic run` in a launch of several processes: the recipe's independent jobs, spread over them.

    accelerate launch --multi_gpu --num_processes 8 -m platonic.cli run recipe.yaml -o runs/paper

Phase one needs only the loaded models and data: one job per source (model, task) that makes it (a
`finetune:` block's fine-tune, through the fine-tune cache) and measures it on the task's probes, and
one job per (model, evaluation set) and (model, task's probe grid) of every solve the edits use
(`experiments.engine.jobs.feature_jobs`). Then every process measures the descriptors (cache hits),
and phase two fits the adapter-route cells (`experiments.engine.cached_adapt`), one job each. Every
job has a cost (the images it processes), so the longest go first to the least loaded process; every
job leaves its result in a shared on-disk cache (locked writes), so the main process can run the
recipe as one process would, find everything there and write the run directory; and a launch that is
killed resumes with the jobs it had not finished.
"""

from __future__ import annotations

from ..data.probe_files import load_probes
from ..distributed import Job, spread
from ..experiments.engine import FeatureStore
from ..experiments.engine.jobs import feature_jobs
from ..experiments.engine.setup import ExperimentSetup
from ..experiments.setups import task_finetune
from ..measurement import measure


def _label(composition: dict[str, float]) -> str:
    return ",".join(f"{task}:{c:+g}" for task, c in composition.items())


def source_jobs(run) -> list[Job]:
    """One job per (source model, task) the edits use: the source made or read, measured on the task's probes."""

    def job(model: str, task: str) -> Job:
        def go() -> str:
            spec = run.tasks[task]
            measure(run.models[model], run.source(model, task), spec.probes, spec.prompts, task, cache=run.cache,
                    progress=False, device=run.device)
            return run.finetunes.get(f"{model}/{task}", "listed")

        return Job(f"{model}/{task}", go, cost=_source_cost(run, model, task))

    return [job(m, t) for m, t in sorted(run.recipe.needed_sources())]


def _source_cost(run, model: str, task: str) -> float:
    """Images a source job processes: its fine-tune's steps x batch (none for a listed source) and its probes."""
    probes = len(run.tasks[task].probes)
    if run.recipe.sources.get(model, {}).get(task) is not None:
        return 2.0 * probes
    block = task_finetune(run.recipe.finetune, task, run.recipe.tasks[task].finetune)
    return block.total_steps(len(run.train[task][1])) * block.batch_size + 2.0 * probes


def encoding_jobs(run) -> list[Job]:
    """The features of every model on every evaluation set and probe grid, for each solve the edits use."""
    bare = ExperimentSetup(run.recipe.name, run.models, run.tasks, run.controls, {})
    jobs = {}
    for settings in {edit.solve for edit in run.recipe.edits}:
        pool = None if settings.anchor_images is None else load_probes(settings.anchor_images, "anchor_images")
        for job in feature_jobs(FeatureStore(bare, cache=run.cache, solve=settings, anchor_images=pool)):
            jobs.setdefault(job.name, job)
    return list(jobs.values())


def adapter_jobs(run) -> list[Job]:
    """One job per adapter-route cell: its adapter fitted into the cache and its evaluation sets encoded."""

    def job(edit, composition, target, source) -> Job:
        def go() -> str:
            run.adapter_cell(edit, composition, target, source)
            return "fitted"

        return Job(f"adapter {edit.name} ({_label(composition)}) on {target} from {source}", go,
                   cost=edit.adapter.max_steps * edit.adapter.batch_size)

    return [job(edit, *cell) for edit in run.recipe.edits if edit.route == "adapter" for cell in run.recipe.cells_of(edit)]


def spread_recipe(run, log=None) -> dict[str, object]:
    """Both phases over the launch's processes; returns {"model/task": "trained" | "cached" | "listed", ...} of
    the sources (what each job reported), the same on every process."""
    done = spread(source_jobs(run) + encoding_jobs(run), log)
    run.measure()  # every process: the descriptors, from the cache
    spread(adapter_jobs(run), log)
    return done


__all__ = ["adapter_jobs", "encoding_jobs", "source_jobs", "spread_recipe"]
