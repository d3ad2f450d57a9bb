"""The embedded world as an ExperimentSetup: its zoo, its eight tasks, its two controls, its fine-tunes.

Descriptors are measured with `platonic.measure` from each model's fine-tune on each task (the
default source kind is the world's; see docs/world.md), on the task's fixed probes (30 per class
from train, seed 42). The gradient-ascent negation baseline fine-tunes the target on the task's
labelled train split with the loss negated, for a fixed budget.
"""

from __future__ import annotations

from pathlib import Path

from safetensors import safe_open

from ..finetune import FinetuneConfig, finetune
from ..task_vector import TaskVector
from .diagnostics import descriptor_cosines
from .setup import EvalSet, ExperimentSetup, TaskSpec, measure_on_grids

DEFAULT_SOURCE_KIND = "full"  # measured: better cross-model agreement and larger gains (docs/world.md)
# Gradient ascent: a short labelled run with a fixed budget (the paper's baseline destroys the model).
ASCENT = FinetuneConfig(mode="full", steps=20, batch_size=64, lr=5e-4, weight_decay=0.0, ascent=True, seed=0)


def _world_data(path: Path):
    from ..world.data import data_from_tensors

    with safe_open(str(path / "data.safetensors"), framework="pt") as f:
        return data_from_tensors({k: f.get_tensor(k) for k in f.keys()})


def world_setup(profile: str | None = None, seed: int = 0, source_kind: str = DEFAULT_SOURCE_KIND,
                progress: bool = True) -> ExperimentSetup:
    """Build the world if needed and describe it as an ExperimentSetup."""
    from ..world import data as wd
    from ..world.build import ensure_world
    from ..world.zoo import MODEL_NAMES, load_world_model

    path = ensure_world(profile, seed, progress=progress)
    data = _world_data(path)
    models = {name: load_world_model(name, root=path) for name in MODEL_NAMES}
    tasks = {}
    for name in wd.TASK_NAMES:
        d, prompts = data[name], tuple(wd.TASKS[name].prompts)
        tasks[name] = TaskSpec(name, prompts, d.probes, EvalSet(name, d.test.images, d.test.labels, prompts),
                               EvalSet(f"{name}/val", d.val.images, d.val.labels, prompts))
    controls = {name: EvalSet(name, data[name].test.images, data[name].test.labels, tuple(wd.CONTROLS[name].prompts))
                for name in wd.CONTROL_NAMES}
    suffix = "" if source_kind == "full" else f"/{source_kind}"
    descriptors, on_grid = measure_on_grids(
        models, tasks, lambda model, task: load_world_model(f"{model}/{task}{suffix}", root=path), progress)

    def task_vector(model: str, task: str) -> TaskVector:
        """tau of the full fine-tune (the task_vectors-style source) of `model` on `task`."""
        finetuned = load_world_model(f"{model}/{task}", root=path)
        models[model].edit_site, finetuned.edit_site  # noqa: B018 - same (possibly appended) structure on both sides
        return TaskVector.from_models(models[model].module, finetuned.module)

    def gradient_ascent(target: str, task: str):
        train = data[task].train
        edited, _ = finetune(models[target], train.images, train.labels, tasks[task].prompts, ASCENT, progress=False)
        return edited

    return ExperimentSetup(f"world ({path.name}, sources: {source_kind} fine-tunes)", models, tasks, controls, descriptors,
                           related_group=tuple(wd.RELATED_GROUP), held_out=wd.HELD_OUT_RELATED,
                           baselines={"gradient_ascent": gradient_ascent, "task_vector": task_vector},
                           diagnostics=descriptor_cosines(list(models), list(tasks), on_grid))
