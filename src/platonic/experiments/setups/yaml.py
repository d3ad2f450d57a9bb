"""A YAML setup (or command-line options) on models the user names -> ExperimentSetup.

The file's schema is `experiments.setups.schema` (docs/experiments.md); `config_setup` loads its models,
reads its data (`experiments.setups.data`), obtains every source (listed, or made by its `finetune:`
block through the fine-tune cache) and measures their descriptors.
"""

from __future__ import annotations

from pathlib import Path

from ...distributed import Job, current, spread
from ...finetuning import FinetuneConfig, finetune, load_finetuned
from ...models import load_model
from ...task_vector import TaskVector
from ..engine import (
    ExperimentSetup,
    cached_finetune,
    changed_deltas,
    descriptor_cosines,
    finetuned_model,
    measure_on_grids,
)
from ..engine.setup import measure_source
from .data import read_data
from .schema import ExperimentConfig, check_files, read_config, task_finetune


def train_digest(images) -> str:
    """The data part of a cached fine-tune's key: the split's digest at the size its images (or clips) decode to."""
    return f"{images.split.digest()}@{images.key}" if hasattr(images, "split") else ""


def made_source(model, task: str, train: tuple, prompts, config: FinetuneConfig, on_miss=None) -> tuple[TaskVector, bool]:
    """(tau, hit): the task vector of `model` fine-tuned on `task`'s (images, labels) by the `finetune:`
    block, from the fine-tune cache when there (`finetuned_model(model, tau, config.mode)` is the fine-tune)."""
    images, labels = train
    digest = train_digest(images)
    if not digest:  # not a split (no digest to key on): train, uncached
        ft = finetune(model, images, labels, prompts, config, progress=False)[0]
        return TaskVector(ft.delta if config.mode == "linear" else changed_deltas(model, ft)), False
    return cached_finetune(model, task, images, labels, prompts, config, digest, on_miss=on_miss)


def spread_sources(models: dict, tasks: dict, source, trained: dict, device="cpu", log=None) -> None:
    """In a launch of several processes: make and measure every (model, task) source as one job each, spread over
    the processes (`distributed.spread`); `trained` gets "trained" for those a process of the launch fine-tuned.
    Nothing happens in a single process (it measures them in order, `measure_on_grids`)."""
    if not current().parallel:
        return

    def job(model: str, task: str) -> Job:
        def run() -> str:
            measure_source(models, tasks, source, model, task, device=device)
            return trained.get(f"{model}/{task}", "listed")

        return Job(f"{model}/{task}", run)

    done = spread([job(m, t) for m in models for t in tasks], log)
    trained.update({name: status for name, status in done.items() if status in ("trained", "cached")})


def config_setup(config: ExperimentConfig | Path | str, progress: bool = True, device="cpu", log=None) -> ExperimentSetup:
    """Load the models, read the data, obtain every source and measure its descriptors.

    Sources made by the `finetune:` block come from the fine-tune cache when they are there
    (`made_source`); `setup.diagnostics["finetunes"]` says which were trained and which were read. In a
    launch of several processes they are made and measured as jobs spread over the processes
    (`spread_sources`; `log` prints one line per job)."""
    if not isinstance(config, ExperimentConfig):
        config = read_config(Path(config))
    check_files(config)  # before loading any model
    models = {name: load_model(spec, device=device) for name, spec in config.models.items()}
    tasks, train, controls = read_data(models, config.tasks, config.controls, config, progress)

    made: dict[tuple[str, str], TaskVector] = {}  # sources made with `finetune`, kept as weight deltas
    trained: dict[str, str] = {}  # "model/task" -> "trained" or "cached"

    def source(model: str, task: str):
        """The fine-tuned model of (model, task): listed ones are read from disk each time they are asked
        for (one in memory at a time); made ones are fine-tuned once and kept as their task vector."""
        listed = config.sources.get(model, {}).get(task)
        if listed is not None:
            return load_finetuned(models[model], listed)
        block = task_finetune(config.finetune, task, config.tasks[task].finetune)
        tau, hit = made_source(models[model], task, train[task], tasks[task].prompts, block)
        trained[f"{model}/{task}"] = "cached" if hit else "trained"
        made[(model, task)] = tau
        return finetuned_model(models[model], tau, block.mode)

    spread_sources(models, tasks, source, trained, device, log)
    launched = dict(trained)
    descriptors, on_grid = measure_on_grids(models, tasks, source, progress, device)
    trained.update({k: v for k, v in launched.items() if v == "trained"})  # trained by a process of this launch

    def task_vector(model: str, task: str) -> TaskVector:
        if (model, task) in made:
            return made[(model, task)]
        return TaskVector.from_models(models[model].module, source(model, task).module)

    def gradient_ascent(target: str, task: str, steps: int | None = None):
        images, labels = train[task]
        budget = config.gradient_ascent if steps is None else config.gradient_ascent.model_copy(update={"steps": steps})
        return finetune(models[target], images, labels, tasks[task].prompts, budget, progress=False)[0]

    return ExperimentSetup(config.name, models, tasks, controls, descriptors, related_group=tuple(config.related_group),
                           held_out=config.held_out, baselines={"gradient_ascent": gradient_ascent, "task_vector": task_vector,
                                                                          "labelled": train.__getitem__},
                           diagnostics={**descriptor_cosines(list(models), list(tasks), on_grid),
                                        **({"finetunes": trained} if trained else {})})
