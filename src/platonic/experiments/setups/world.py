"""The embedded world as an ExperimentSetup: its zoo, its eight tasks, its two controls, its fine-tunes.

Descriptors are measured with `platonic.measure` from each model's fine-tune on each task (the
default source kind is the world's; see docs/world.md), on the task's fixed probes (30 per class
from train, seed 42), when an experiment first needs one (`setup.MeasuredGrids`): weight_space and
orthoreg_sources use the fine-tune cache's own descriptors, and do not measure the world's. The
gradient-ascent negation baseline fine-tunes the target on the task's labelled train split with the
loss negated, for the one fixed budget `platonic.finetuning.GRADIENT_ASCENT` (its task vectors kept in
the fine-tune cache, `finetune_cache.cached_task_vector`).
`parts_setup` turns any built world's parts into the setup; the audio world uses it too
(`experiments.audio_world_setup`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from safetensors import safe_open

from ...errors import InvalidInputError
from ...finetuning.training import GRADIENT_ASCENT
from ..engine.finetune_cache import cached_task_vector, finetuned_model
from ..engine.setup import EvalSet, ExperimentSetup, GridDiagnostics, MeasuredGrids, TaskSpec
from ..engine.sources import CachedSources

DEFAULT_SOURCE_KIND = "full"  # measured: better cross-model agreement and larger gains (docs/lab/2026-12-02-world-recipe-089d829ab416.md)


def world_data(path: Path) -> dict:
    """The built world's data at `path`: task or control name -> ImageTaskData (train / val / test splits, probes)."""
    from ...world.image.data import data_from_tensors

    with safe_open(str(path / "data.safetensors"), framework="pt") as f:
        return data_from_tensors({k: f.get_tensor(k) for k in f.keys()})


@dataclass
class WorldParts:
    """A built world seen by the experiment engine.

    models: name -> pre-trained WorldModel; tasks: name -> TaskSpec (probes, test and val splits);
    controls: name -> EvalSet; data: name -> ImageTaskData (every split, for the labelled baselines).
    """

    path: Path
    models: dict
    tasks: dict
    controls: dict
    data: dict

    def finetuned(self, model: str, task: str, kind: str = DEFAULT_SOURCE_KIND):
        """The source fine-tune of `model` on `task` ("full" | "lora")."""
        from ...world.backend import load_world_model

        return load_world_model(f"{model}/{task}" + ("" if kind == "full" else f"/{kind}"), root=self.path)

    def split(self, name: str, split: str) -> EvalSet:
        """The `split` ("train" | "val") of task or control `name` as an EvalSet named "NAME/SPLIT"."""
        part = getattr(self.data[name], split)
        prompts = self.tasks[name].prompts if name in self.tasks else self.controls[name].prompts
        return EvalSet(f"{name}/{split}", part.images, part.labels, prompts)

    def train(self, name: str):
        """(images (n, 3, S, S) uint8, labels (n,)) of task `name`'s labelled train split."""
        part = self.data[name].train
        return part.images, part.labels


def world_parts(path: Path, models=None) -> WorldParts:
    """Load the built world at `path` (models: the names to load, default all; tasks, controls, data)."""
    from ...world.backend import load_world_model
    from ...world.image.zoo import MODEL_NAMES

    data = world_data(path)
    models = {name: load_world_model(name, root=path) for name in (models or MODEL_NAMES)}
    return WorldParts(path, models, *image_world_sets(data), data)


def image_world_sets(data: dict) -> tuple[dict, dict]:
    """(tasks: name -> TaskSpec (probes, test and val splits), controls: name -> EvalSet (test split)) of an image
    world's data (`world_data`)."""
    from ...world.image import data as wd

    tasks = {}
    for name in wd.TASK_NAMES:
        d, prompts = data[name], tuple(wd.TASKS[name].prompts)
        tasks[name] = TaskSpec(name, prompts, d.probes, EvalSet(name, d.test.images, d.test.labels, prompts),
                               EvalSet(f"{name}/val", d.val.images, d.val.labels, prompts))
    controls = {name: EvalSet(name, data[name].test.images, data[name].test.labels, tuple(wd.CONTROLS[name].prompts))
                for name in wd.CONTROLS if name in data}  # the controls the world was built with
    return tasks, controls


def ascended(model, task: str, images, labels, prompts, steps: int | None = None):
    """(theta_0 + tau, hit): `model` after the gradient-ascent baseline on (images, labels), its task vector
    tau from the fine-tune cache when there (a second demo trains nothing). The edit is rebuilt from tau
    on a miss too, so a first and a cached run evaluate the same weights. steps: the budget (default
    `GRADIENT_ASCENT`'s, 20)."""
    config = GRADIENT_ASCENT if steps is None else GRADIENT_ASCENT.model_copy(update={"steps": steps})
    tau, hit = cached_task_vector(model, task, images, labels, prompts, config)
    return finetuned_model(model, tau), hit


def world_sources(world, models: dict, tasks: dict, recipe=None, task_names=None) -> CachedSources:
    """The fine-tune cache's full fine-tunes of a world's models (`experiments.engine.CachedSources`).

    world: `WorldParts` or the audio world's parts (anything with `train(task) -> (inputs, labels)`);
    recipe: an `engine.TaskVectorRecipe` (default: its defaults, 64 steps at batch 64); a task's seed is
    its index among all the world's tasks (`task_names`, default the image world's), so a run on some
    tasks shares entries with one on all of them, and with `platonic experiment task_arithmetic
    --flavours full` of the same recipe.
    """
    from ...world.image import data as wd
    from ..engine.weight_space import TaskVectorRecipe

    recipe = recipe or TaskVectorRecipe()
    names = tuple(task_names or wd.TASK_NAMES)
    train = {t: world.train(t) for t in tasks}
    return CachedSources(models, tasks, train, lambda task, lam: recipe.config("full", lam, names.index(task)),
                         {"flavour": "full", **recipe.model_dump()})


def check_names(kind: str, models, tasks, model_names, task_names) -> None:
    """Refuse unknown model / task names of the `kind` world ("world", "audio world"), and fewer than two tasks."""
    for what, names, have in (("model", models, model_names), ("task", tasks, task_names)):
        unknown = [n for n in names or () if n not in have]
        if unknown:
            raise InvalidInputError(f"unknown {kind} {what}(s) {', '.join(unknown)}; choose from {', '.join(have)}")
    if tasks is not None and len(tasks) < 2:
        raise InvalidInputError("the experiments need at least two tasks; name two or more with --tasks")


def parts_setup(world, label: str, task_names, related_group, held_out_related, tasks=None,
                source_kind: str = DEFAULT_SOURCE_KIND, recipe=None, progress: bool = True, ascend=None,
                ascent_label: str = "", finetune_models=None) -> ExperimentSetup:
    """A built world's parts (image or audio) as an ExperimentSetup.

    world: the loaded parts (models, tasks, controls, data, `finetuned`, `train`); label: the setup's
    name; task_names: all the world's tasks in order (the fine-tune cache's seeds); related_group /
    held_out_related: the world's related tasks, kept when the held-out task and at least two related
    tasks are among `tasks` (else the setup has no related group, and generalization is refused).
    ascend: (model, task, steps) -> the gradient-ascent baseline's model (default: the whole tower, `ascended`);
    ascent_label: what it trains, for the setup's name (e.g. ", gradient ascent: last stage + head").
    finetune_models: name -> the model the cached fine-tunes (`baselines["finetunes"]`) train, with the same
    parameter names (default the world's models; the trunk world's: frozen below the cut).
    """
    models = world.models
    tasks = {t: world.tasks[t] for t in (tasks or world.tasks)}
    related = tuple(t for t in related_group if t in tasks)
    held_out = held_out_related if held_out_related in tasks and len(related) >= 2 else None
    descriptors = MeasuredGrids(models, tasks, lambda model, task: world.finetuned(model, task, source_kind), progress)
    sources = world_sources(world, models if finetune_models is None else finetune_models, tasks, recipe, task_names)

    def gradient_ascent(target: str, task: str, steps: int | None = None):
        if ascend is not None:
            return ascend(target, task, steps)
        inputs, labels = world.train(task)
        return ascended(models[target], task, inputs, labels, tasks[task].prompts, steps)[0]

    return ExperimentSetup(f"{label} ({world.path.name}, sources: {source_kind} fine-tunes{ascent_label})", models, tasks, world.controls,
                           descriptors, related_group=related if held_out else (), held_out=held_out,
                           baselines={"gradient_ascent": gradient_ascent, "task_vector": sources.task_vector,
                                      "finetunes": sources, "labelled": world.train},
                           diagnostics=GridDiagnostics(descriptors))


def world_setup(profile: str | None = None, seed: int = 0, source_kind: str = DEFAULT_SOURCE_KIND,
                progress: bool = True, models=None, tasks=None, recipe=None, path: Path | None = None) -> ExperimentSetup:
    """Build the world if needed and describe it as an ExperimentSetup.

    models / tasks: the names to keep (default all; unknown names are refused); recipe: the fine-tune
    cache's recipe for `baselines["finetunes"]` (the weight-space task vectors and the OrthoReg-source
    protocol); path: a built world directory (default: the cached world of `profile`).
    """
    from ...world.image import data as wd
    from ...world.image.build import built_kinds, ensure_sources, ensure_world
    from ...world.image.zoo import MODEL_NAMES

    check_names("world", models, tasks, MODEL_NAMES, wd.TASK_NAMES)
    if path is None:
        path = ensure_world(profile, seed, progress=progress, kinds=(source_kind,))
    elif built_kinds(path):
        path = ensure_sources(path, (source_kind,), progress=progress)
    world = world_parts(path, models=list(models) if models else None)
    return parts_setup(world, "world", wd.TASK_NAMES, wd.RELATED_GROUP, wd.HELD_OUT_RELATED, tasks, source_kind, recipe,
                       progress)
