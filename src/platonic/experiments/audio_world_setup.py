"""The embedded audio world as an ExperimentSetup: its four audio-text models, nine tasks, two controls.

The audio counterpart of `world_setup.world_setup` (`platonic experiment --setup audio-world`,
`platonic demo --setup audio-world`): descriptors are measured with `platonic.measure` from each
model's source fine-tune on each task, on the task's fixed probes (30 train clips per class, seed 42);
the related group is digits and commands (spoken words), the held-out related task colours; the
controls are drums and animals (sounds no task uses). The gradient-ascent negation baseline and the
fine-tune cache's task vectors work as on the image world.
"""

from __future__ import annotations

from pathlib import Path

from .setup import ExperimentSetup
from .world_setup import DEFAULT_SOURCE_KIND, check_names, parts_setup


def audio_world_setup(profile: str | None = None, seed: int = 0, source_kind: str = DEFAULT_SOURCE_KIND,
                      progress: bool = True, models=None, tasks=None, recipe=None, path: Path | None = None) -> ExperimentSetup:
    """Build the audio world if needed (`world.audio.build.ensure_audio_world`) and describe it as an ExperimentSetup.

    models / tasks: the names to keep (default all; unknown names are refused); source_kind: "full" or
    "lora" sources; recipe: the fine-tune cache's recipe (weight-space task vectors); path: a built audio
    world directory (default: the cached one of `profile`, $PLATONIC_WORLD_PROFILE or full).
    """
    from ..world.audio import tasks as at
    from ..world.audio.build import ensure_audio_world
    from ..world.audio.zoo import MODEL_NAMES
    from .audio_world_checks import audio_world_parts

    check_names("audio world", models, tasks, MODEL_NAMES, at.TASK_NAMES)
    path = Path(path) if path is not None else ensure_audio_world(profile, seed, progress=progress)
    world = audio_world_parts(path, models=list(models) if models else None)
    return parts_setup(world, "audio world", at.TASK_NAMES, at.RELATED_GROUP, at.HELD_OUT_RELATED, tasks, source_kind,
                       recipe, progress)
