"""What the task-arithmetic experiment (method.md §2) runs on: models, labelled tasks, controls.

Unlike the descriptor protocols it fine-tunes, so every task carries its labelled train split, and
every choice (alpha, OrthoReg's lambda) is made on validation splits: each task's val split, and each
control's val split. A control without one (a YAML control: one folder) is split in two by a seeded
permutation: the first half is its validation split, the second its test split.

Three builders: the embedded world (`world_ta_setup`, from a built world directory, no descriptors
measured), the world on pretrained trunks (`trunk_ta_setup`, its models frozen below the cut, so fine-tunes train
what its sources train) and a YAML setup (`config_ta_setup`; its tasks need train and val folders).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from ...errors import InvalidInputError
from ..engine.setup import EvalSet
from ..engine import TaskVectorRecipe

CONTROL_SPLIT_SEED = 7


@dataclass(frozen=True)
class LabelledTask:
    """A task with its three splits (inputs canonical, labels index `prompts`)."""

    name: str
    prompts: tuple[str, ...]
    train: EvalSet
    val: EvalSet
    test: EvalSet


@dataclass(frozen=True)
class Control:
    """A control data set: the val split gates negation's alpha, the test split is reported."""

    name: str
    val: EvalSet
    test: EvalSet


@dataclass
class TaskArithmeticSetup:
    name: str
    models: dict  # name -> DualEncoder (pre-trained)
    tasks: dict[str, LabelledTask]
    controls: dict[str, Control] = field(default_factory=dict)
    recipe: TaskVectorRecipe | None = None  # a YAML's `task_vectors:` block; None: TaskVectorRecipe's defaults

    def describe(self) -> dict:
        return {"name": self.name,
                "models": {n: {"spec": m.spec, "fingerprint": m.base_fingerprint} for n, m in self.models.items()},
                "tasks": {n: {"classes": len(t.prompts), "train": len(t.train.labels), "val": len(t.val.labels),
                              "test": len(t.test.labels)} for n, t in self.tasks.items()},
                "controls": {n: {"classes": len(c.test.prompts), "val": len(c.val.labels), "test": len(c.test.labels)}
                             for n, c in self.controls.items()}}

    def select(self, models=None, tasks=None) -> "TaskArithmeticSetup":
        """The same setup restricted to some models and tasks (names checked)."""
        for what, names, have in (("model", models, self.models), ("task", tasks, self.tasks)):
            unknown = [n for n in names or () if n not in have]
            if unknown:
                raise InvalidInputError(f"unknown {what}(s) {', '.join(unknown)}; this setup has {', '.join(have)}")
        keep_m = list(models) if models else list(self.models)
        keep_t = list(tasks) if tasks else list(self.tasks)
        if len(keep_t) < 2:
            raise InvalidInputError("task addition needs at least two tasks; name two or more with --tasks")
        return TaskArithmeticSetup(self.name, {n: self.models[n] for n in keep_m}, {n: self.tasks[n] for n in keep_t},
                                   self.controls, self.recipe)


def split_control(name: str, whole: EvalSet, seed: int = CONTROL_SPLIT_SEED) -> Control:
    """A control from one labelled set: a seeded half as val, the other half as test."""
    n = len(whole.labels)
    if n < 2:
        raise InvalidInputError(f"control {name!r} has {n} image(s); it needs at least two (half val, half test)")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    val_idx, test_idx = order[: n // 2], order[n // 2 :]
    part = lambda idx, tag: EvalSet(tag, whole.inputs[idx], whole.labels[idx], whole.prompts)  # noqa: E731
    return Control(name, part(val_idx, f"{name}/val"), part(test_idx, name))


def world_ta_setup(path: Path | None = None, models=None) -> TaskArithmeticSetup:
    """The built world at `path` (default: `ensure_world()`, which builds it if needed), no descriptors."""
    from ...world.image.zoo import MODEL_NAMES
    from .world import world_parts

    if path is None:
        from ...world.image.build import ensure_world

        path = ensure_world()
    path = Path(path)
    if not (path / "data.safetensors").is_file():
        raise InvalidInputError(f"{path} is not a built world (no data.safetensors); give a directory under "
                                "~/.cache/platonic/world/ or leave --world out to build one")
    names = list(models) if models else list(MODEL_NAMES)
    unknown = [n for n in names if n not in MODEL_NAMES]
    if unknown:
        raise InvalidInputError(f"unknown world model(s) {', '.join(unknown)}; choose from {', '.join(MODEL_NAMES)}")
    world = world_parts(path, models=names)
    tasks = {name: LabelledTask(name, spec.prompts, world.split(name, "train"), spec.val, spec.test)
             for name, spec in world.tasks.items()}
    controls = {name: Control(name, world.split(name, "val"), test) for name, test in world.controls.items()}
    return TaskArithmeticSetup(f"world ({path.name})", world.models, tasks, controls)


def trunk_ta_setup(path: Path | None = None, models=None) -> TaskArithmeticSetup:
    """The built trunk world at `path` (default: the cached one, built if needed), its models frozen below the cut
    (`trunkworld.frozen_trunk_model`: fine-tunes train the part above it, as the world's sources do), the build's
    train activations kept so that no train image runs through the trunk again."""
    from ...world.image.trunkworld.build import ensure_trunk_world, require_built
    from ...world.image.trunkworld.recipe import MODEL_NAMES, STUDENT_NAMES
    from .trunk_world import FrozenModels, trunk_world_parts

    path = ensure_trunk_world() if path is None else require_built(Path(path))
    names = list(models) if models else list(MODEL_NAMES)
    known = MODEL_NAMES + STUDENT_NAMES
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidInputError(f"unknown trunk world model(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    world = trunk_world_parts(path, models=names)
    frozen = dict(FrozenModels(world))
    tasks = {name: LabelledTask(name, spec.prompts, world.split(name, "train"), spec.val, spec.test)
             for name, spec in world.tasks.items()}
    controls = {name: Control(name, world.split(name, "val"), test) for name, test in world.controls.items()}
    return TaskArithmeticSetup(f"trunk world ({path.name}), frozen below the cut", frozen, tasks, controls)


def config_ta_setup(config, device="cpu") -> TaskArithmeticSetup:
    """A YAML setup (`experiments.setups.ExperimentConfig`): its models, tasks (train and val needed), controls."""
    from ...models import load_model
    from .yaml import check_files, read_data

    check_files(config)
    models = {name: load_model(spec, device=device) for name, spec in config.models.items()}
    specs, train, read_controls = read_data(models, config.tasks, config.controls, config, progress=False)
    tasks = {}
    for name, spec in specs.items():
        images, labels = train[name]
        if spec.val is None:
            raise InvalidInputError(f"task {name!r} has no val split; task arithmetic chooses alpha and lambda on "
                                    "validation only: add FOLDER/val/CLASS/* images")
        images = images.materialise()  # task arithmetic fine-tunes (and caches) on the whole train split
        tasks[name] = LabelledTask(name, spec.prompts, EvalSet(f"{name}/train", images, labels, spec.prompts), spec.val, spec.test)
    controls = {name: split_control(name, control) for name, control in read_controls.items()}
    return TaskArithmeticSetup(config.name, models, tasks, controls, config.task_vectors)


def labelled_setup(setup: str, models=(), tasks=(), controls=(), world: Path | None = None, model_names=None,
                   task_names=None, device="cpu") -> TaskArithmeticSetup:
    """The task-arithmetic setup `platonic experiment task_arithmetic` runs on: the embedded world
    ("world", or the built directory `world`), a YAML file, or --model / --task / --control options
    (added to the YAML's); then `model_names` / `task_names` of it (None: all)."""
    own = any((models, tasks, controls))
    if setup == "world" and not own:
        loaded = world_ta_setup(world, models=model_names)
    elif setup == "trunk-world":
        if own:
            raise InvalidInputError("--setup trunk-world runs on the trunk world's own models and tasks; give --model / "
                                    "--task / --control without it, or with a YAML setup")
        loaded = trunk_ta_setup(world, models=model_names)
    else:
        if world is not None:
            raise InvalidInputError("--world names the embedded world's directory; it does not apply to a YAML or "
                                    "--model setup")
        if setup != "world" and not Path(setup).is_file():
            raise InvalidInputError(f"task_arithmetic runs on --setup world, trunk-world or a YAML file; got {setup!r}")
        from .schema import config_from_options, read_config

        config = read_config(Path(setup), task_arithmetic=True) if setup != "world" else None
        if own:
            config = config_from_options(list(models), list(tasks), list(controls), [], config, task_arithmetic=True)
        loaded = config_ta_setup(config, device=device).select(models=model_names)
    return loaded.select(tasks=task_names)
