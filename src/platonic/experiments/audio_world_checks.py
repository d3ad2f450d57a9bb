"""The audio world's acceptance figures, measured by the experiment engine like the image world's.

`audio_world_parts(path)` describes a built audio world (`platonic.world.audio.build`) the way
`world_setup.world_parts` describes the image world: its four models, nine tasks (probes: 30 train
clips per class, seed 42; test and val splits), two controls and its fine-tuned sources; every figure
then comes from the same code (`world_checks.measure_parts`, `summarise`, `checks`): zero-shot and
fine-tuned accuracy, descriptor agreement (same-task cross-model vs cross-task cosine), the oracle
(own descriptor, alpha 1) and its recovery, cross-model transfer at alpha 0.5, the diagnostics.

`audio_world_report(path)` writes report.json and report.md into the audio world's directory (once; cached).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .setup import EvalSet, TaskSpec
from .world_checks import measure_parts, write_report


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
        from ..world.audio.backend import load_audio_world_model

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
    from ..world.audio import dataset
    from ..world.audio.backend import load_audio_world_model
    from ..world.audio.build import world_data_file
    from ..world.audio.tasks import CONTROL_NAMES, TASK_NAMES
    from ..world.audio.zoo import MODEL_NAMES

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


def audio_world_report(path, progress: bool = False, force: bool = False, diagnostics: bool = True) -> dict:
    """The audio world's report (measured once, then read from report.json); writes report.json and report.md.

    diagnostics=False (the tests' tiny world) leaves out the image world's diagnostics (linear probe, best
    linear map, locality, participation ratio; minutes even on the tiny profile) and the checks that read them.
    """
    from ..world.audio.tasks import CONTROL_NAMES, TASK_NAMES
    from .world_report import markdown_report

    def markdown(report: dict) -> str:
        return markdown_report(report, TASK_NAMES, CONTROL_NAMES, title="platonic audio world report")

    return write_report(path, lambda: measure_parts(audio_world_parts(path), progress=progress, diagnostics=diagnostics),
                        markdown, force=force)
