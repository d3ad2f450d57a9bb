"""What an experiment runs on: models, tasks with probes and test sets, controls, descriptors.

The embedded world provides one (`platonic.experiments.world_setup`), a YAML file another
(`platonic.experiments.config`); both measure their descriptors with `measure_on_grids`.
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


def measure_on_grids(models: dict[str, DualEncoder], tasks: dict[str, TaskSpec], finetuned: Callable[[str, str], DualEncoder],
                     progress: bool = True, device="cpu") -> tuple[dict, dict]:
    """Every source fine-tune measured on every task's grid.

    finetuned(model, source_task) -> the fine-tuned model (asked once per pair, so one is in memory).
    Returns (descriptors, on_grid): on_grid[(m, s, t)] is what m's fine-tune on s changed on t's probes
    and prompts (the cross-task diagnostics need it); descriptors[(m, t)] = on_grid[(m, t, t)].
    """
    from ..measurement import EmbeddingCache, measure
    from ..progress import track

    cache = EmbeddingCache()
    on_grid = {}
    for model in track(list(models), description="measuring descriptors", enabled=progress):
        for source_task in tasks:
            ft = finetuned(model, source_task)
            for task, spec in tasks.items():
                on_grid[(model, source_task, task)] = measure(models[model], ft, spec.probes, spec.prompts, task,
                                                              cache=cache, progress=False, device=device)
    return {(m, t): on_grid[(m, t, t)] for m in models for t in tasks}, on_grid
