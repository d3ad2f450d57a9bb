"""What an experiment runs on: models, tasks with probes and test sets, controls, descriptors.

The embedded world provides one (`platonic.world.experiments.world_setup`); any set of real models
and tasks can be described the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from ..descriptor import Descriptor
from ..models import DualEncoder


@dataclass(frozen=True)
class EvalSet:
    """A labelled evaluation set: `inputs` in the models' canonical form, `labels` (n,), class prompts."""

    name: str
    inputs: torch.Tensor
    labels: torch.Tensor
    prompts: tuple[str, ...]


@dataclass(frozen=True)
class TaskSpec:
    """A task: its class prompts, unlabeled probes (canonical), test set and optional validation set."""

    name: str
    prompts: tuple[str, ...]
    probes: torch.Tensor
    test: EvalSet
    val: EvalSet | None = None


@dataclass
class ExperimentSetup:
    """Everything the experiments need.

    descriptors: (source model name, task name) -> the source fine-tune's descriptor on the task's probes.
    related_group / held_out: tasks whose operators are applied to the held-out related task.
    baselines: optional named callables for baselines that need more than cached features, e.g.
        "gradient_ascent": (model name, task name) -> DualEncoder (an edited copy).
    diagnostics: results computed while building the setup (descriptor cosines), written into results.json.
    """

    name: str
    models: dict[str, DualEncoder]
    tasks: dict[str, TaskSpec]
    controls: dict[str, EvalSet]
    descriptors: dict[tuple[str, str], Descriptor]
    related_group: tuple[str, ...] = ()
    held_out: str | None = None
    baselines: dict[str, Callable] = field(default_factory=dict)
    diagnostics: dict = field(default_factory=dict)  # precomputed, e.g. descriptor cosines; copied into results

    def describe(self) -> dict:
        return {
            "name": self.name,
            "models": {name: {"spec": m.spec, "fingerprint": m.base_fingerprint, "embed_dim": m.embed_dim,
                              "edit_site": m.edit_site.describe()} for name, m in self.models.items()},
            "tasks": {name: {"classes": len(t.prompts), "probes": int(t.probes.shape[0]), "test": len(t.test.labels)}
                      for name, t in self.tasks.items()},
            "controls": {name: {"classes": len(c.prompts), "test": len(c.labels)} for name, c in self.controls.items()},
            "related_group": list(self.related_group),
            "held_out": self.held_out,
        }
