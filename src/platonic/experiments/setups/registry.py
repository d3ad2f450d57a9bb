"""The named setups (`SETUPS`: world, audio-world, trunk-world, toy) and `load_setup`, which also makes setups of the
user's own models from a YAML file or command-line options.

An embedded world (`SetupEntry.world`) can be sliced: some of its models or tasks, a built directory of
it, or the fine-tune cache's recipe for its task vectors (`world_slice`). The named setups build and
encode on the CPU (their models are tiny), so a device other than the CPU is refused for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...errors import InvalidInputError
from ..engine import ExperimentSetup, TaskVectorRecipe
from .audio_world import audio_world_setup
from .schema import ExperimentConfig, config_from_options, read_config
from .toy import toy_setup
from .trunk_world import trunk_world_setup
from .world import world_data, world_setup
from .yaml import config_setup


@dataclass(frozen=True)
class SetupEntry:
    """A named setup: make(**slice) -> ExperimentSetup; world: an embedded world, which takes
    models= / tasks= / path= / recipe= (`world_slice`)."""

    name: str
    make: Callable[..., ExperimentSetup]
    description: str
    world: bool = False


SETUPS = {entry.name: entry for entry in (
    SetupEntry("world", world_setup, "the embedded image world of tiny towers trained from scratch (built on first "
               "use)", world=True),
    SetupEntry("audio-world", audio_world_setup, "the embedded audio world (built on first use)", world=True),
    SetupEntry("trunk-world", trunk_world_setup, "the image world on pretrained EfficientNet-Lite trunks, open_clip "
               "models (built on first use)", world=True),
    SetupEntry("toy", toy_setup, "synthetic, seconds"),
)}
WORLD_SETUPS = tuple(name for name, entry in SETUPS.items() if entry.world)


def check_device(setup: str, own_models: bool, device: str) -> None:
    """Refuse a device other than the CPU for the named setups (world, audio-world, toy), which build and
    encode on the CPU: a GPU named there would otherwise be ignored without a word."""
    if setup in SETUPS and not own_models and str(device).split(":")[0] != "cpu":
        raise InvalidInputError(f"--device {device} does not apply to --setup {setup}: the built-in setups run on "
                                "the CPU (their models are tiny); --device applies to YAML and --model setups")


def load_setup(name: str, models=(), tasks=(), controls=(), sources=(), device: str = "cpu",
               check: Callable[[ExperimentConfig], None] | None = None, log=None) -> ExperimentSetup:
    """A named setup (world, audio-world, toy), a YAML setup file, or one made of command-line options.

    Options (NAME=VALUE strings) are added to a YAML file's setup; with the default setup (world)
    they make a setup of their own. `check(config)` runs on a YAML or option setup's config before any
    model loads (e.g. that it can run the named experiments: generalization needs a related group).
    """
    own = any((models, tasks, controls, sources))
    if name in SETUPS and not own:
        return SETUPS[name].make()
    if name in SETUPS and name != "world":
        raise InvalidInputError(f"--model/--task/--control/--source cannot be added to the {name} setup; "
                                "use them alone or with a YAML file")
    if name not in SETUPS and not Path(name).is_file():
        raise InvalidInputError(f"unknown setup {name!r}: give {', '.join(SETUPS)}, or a YAML file (docs/experiments.md)")
    config = read_config(Path(name)) if name not in SETUPS else None
    if own:
        config = config_from_options(list(models), list(tasks), list(controls), list(sources), config)
    if check is not None:
        check(config)
    return config_setup(config, device=device, log=log)


def world_slice(setup: str, models: list[str] | None = None, tasks: list[str] | None = None, path: Path | None = None,
                steps: int | None = None) -> ExperimentSetup:
    """An embedded world (`setup`: world | audio-world) with some models / tasks, a built directory, or the
    fine-tune cache's steps for its task vectors."""
    entry = SETUPS[setup]
    if not entry.world:
        raise InvalidInputError(f"--models / --tasks / --world / --steps slice the embedded worlds "
                                f"({', '.join(WORLD_SETUPS)}), not {setup!r}")
    recipe = TaskVectorRecipe(**({"steps": steps} if steps is not None else {}))
    return entry.make(models=models, tasks=tasks, recipe=recipe, path=path)


def world_grid(task: str, audio: bool = False, profile: str = "full", seed: int = 0):
    """(probes, prompts) of `task` in the built world (image, or audio with `audio`), built where needed."""
    if audio:
        from ...world.audio import dataset
        from ...world.audio.build import check_profile, ensure_audio_world, world_data_file
        from ...world.audio.tasks import TASK_NAMES as names
    else:
        from ...world.image import data as wd
        from ...world.image.build import check_profile, ensure_world

        names = wd.TASK_NAMES
    if task not in names:
        raise InvalidInputError(f"unknown {'audio ' if audio else ''}world task {task!r}; choose from {', '.join(names)}"
                                + ("" if audio else " (or add --audio for the audio world's)"))
    check_profile(profile)
    if audio:
        d = dataset.load_audio_data(world_data_file(ensure_audio_world(profile, seed)))[task]
        return d.probes, list(d.task.prompts)
    d = world_data(ensure_world(profile, seed))[task]
    return d.probes, list(wd.TASKS[task].prompts)
