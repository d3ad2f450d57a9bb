"""The embedded audio world as an ExperimentSetup: its four audio-text models, nine tasks, two controls.

The audio counterpart of `setups.world.world_setup` (`platonic experiment --setup audio-world`,
`platonic demo --setup audio-world`): descriptors are measured with `platonic.measure` from each
model's source fine-tune on each task, on the task's fixed probes (30 train clips per class, seed 42);
the related group is digits and commands (spoken words), the held-out related task colours; the
controls are drums and animals (sounds no task uses). The gradient-ascent negation baseline and the
fine-tune cache's task vectors work as on the image world. `audio_world_parts(path)` reads a built audio
world (`platonic.world.audio.build`) the way `setups.world.world_parts` reads the image world.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..engine.setup import EvalSet, ExperimentSetup, TaskSpec
from .world import DEFAULT_SOURCE_KIND, check_names, parts_setup


@dataclass
class AudioWorldParts:
    """A built audio world seen by the engine: models (name -> AudioWorldModel), tasks (TaskSpec of canonical
    clips (N, 16000)), controls (EvalSet), data (name -> AudioTaskData)."""

    path: Path
    models: dict
    tasks: dict
    controls: dict
    data: dict

    def finetuned(self, model: str, task: str, kind: str = "full"):
        """The source fine-tune of `model` on `task` ("full" | "lora")."""
        from ...world.audio.backend import load_audio_world_model

        return load_audio_world_model(f"{model}/{task}" + ("" if kind == "full" else f"/{kind}"), root=self.path)

    def split(self, name: str, split: str) -> EvalSet:
        """The `split` ("train" | "val") of task or control `name` as an EvalSet named "NAME/SPLIT"."""
        part = getattr(self.data[name], split)
        prompts = self.tasks[name].prompts if name in self.tasks else self.controls[name].prompts
        return EvalSet(f"{name}/{split}", part.clips, part.labels, prompts)

    def train(self, name: str):
        """(clips (n, 16000) float32, labels (n,)) of task `name`'s labelled train split."""
        part = self.data[name].train
        return part.clips, part.labels


def audio_world_parts(path, models=None) -> AudioWorldParts:
    """Load the built audio world at `path` (models: the names to load, default all)."""
    from ...world.audio import dataset
    from ...world.audio.backend import load_audio_world_model
    from ...world.audio.build import world_data_file
    from ...world.audio.tasks import CONTROL_NAMES, TASK_NAMES
    from ...world.audio.zoo import MODEL_NAMES

    path = Path(path)
    data = dataset.load_audio_data(world_data_file(path))
    loaded = {name: load_audio_world_model(name, root=path) for name in (models or MODEL_NAMES)}
    tasks = {}
    for name in TASK_NAMES:
        d = data[name]
        prompts = tuple(d.task.prompts)
        tasks[name] = TaskSpec(name, prompts, d.probes, EvalSet(name, d.test.clips, d.test.labels, prompts),
                               EvalSet(f"{name}/val", d.val.clips, d.val.labels, prompts))
    controls = {name: EvalSet(name, data[name].test.clips, data[name].test.labels, tuple(data[name].task.prompts))
                for name in CONTROL_NAMES}
    return AudioWorldParts(path, loaded, tasks, controls, data)



def audio_world_setup(profile: str | None = None, seed: int = 0, source_kind: str = DEFAULT_SOURCE_KIND,
                      progress: bool = True, models=None, tasks=None, recipe=None, path: Path | None = None) -> ExperimentSetup:
    """Build the audio world if needed (`world.audio.build.ensure_audio_world`) and describe it as an ExperimentSetup.

    models / tasks: the names to keep (default all; unknown names are refused); source_kind: "full" or
    "lora" sources; recipe: the fine-tune cache's recipe (weight-space task vectors); path: a built audio
    world directory (default: the cached one of `profile`, $PLATONIC_WORLD_PROFILE or full).
    """
    from ...world.audio import tasks as at
    from ...world.audio.build import ensure_audio_sources, ensure_audio_world
    from ...world.common.kinds import built_kinds
    from ...world.audio.zoo import MODEL_NAMES

    check_names("audio world", models, tasks, MODEL_NAMES, at.TASK_NAMES)
    if path is None:
        path = ensure_audio_world(profile, seed, progress=progress, kinds=(source_kind,))
    else:
        path = Path(path)
        if built_kinds(path):
            ensure_audio_sources(path, (source_kind,), progress=progress)
    world = audio_world_parts(path, models=list(models) if models else None)
    return parts_setup(world, "audio world", at.TASK_NAMES, at.RELATED_GROUP, at.HELD_OUT_RELATED, tasks, source_kind,
                       recipe, progress)
