"""What an experiment runs on: models, tasks with probes and test sets, controls, descriptors.

The embedded world provides one (`platonic.experiments.setups.world`), a YAML file another
(`platonic.experiments.setups.yaml`); both measure their descriptors with `measure_on_grids` (the world's
on first use, `MeasuredGrids`, so an experiment that needs none of them does not pay for them).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import torch

from ...descriptor import Descriptor
from ...errors import ZeroDescriptorWarning
from ...models import DualEncoder
from .diagnostics import descriptor_cosines


@dataclass(frozen=True)
class EvalSet:
    """A labelled evaluation set: `inputs` in the models' canonical form (a tensor, or past
    `setups.data.LAZY_ROWS` rows a lazily decoded split), `labels` (n,), class prompts."""

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
        "gradient_ascent": (model name, task name, steps=None) -> DualEncoder (an edited copy; steps: the
        ascent's budget, None for the setup's own);
        "labelled": task name -> (inputs (n, ...) canonical, labels (n,)) its labelled train split (GradFix);
        "task_vector", "finetunes": the weight-space experiments' fine-tunes (`experiments.engine.sources`).
    diagnostics: results of building the setup (descriptor cosines), written into results.json when a run ends.
    """

    name: str
    models: dict[str, DualEncoder]
    tasks: dict[str, TaskSpec]
    controls: dict[str, EvalSet]
    descriptors: Mapping[tuple[str, str], Descriptor]
    related_group: tuple[str, ...] = ()
    held_out: str | None = None
    baselines: dict[str, Callable] = field(default_factory=dict)
    diagnostics: Mapping = field(default_factory=dict)  # e.g. descriptor cosines; copied into results when the run ends

    def describe(self) -> dict:
        return {
            "name": self.name,
            "models": {name: {"spec": m.spec, "fingerprint": m.base_fingerprint, "embed_dim": m.embed_dim,
                              "edit_site": m.edit_site.describe(), "family": m.family} for name, m in self.models.items()},
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
    from ...measurement import EmbeddingCache
    from ...progress import track

    cache = EmbeddingCache()
    on_grid = {}
    for model in track(list(models), description="measuring descriptors", enabled=progress):
        for source_task in tasks:
            on_grid.update(measure_source(models, tasks, finetuned, model, source_task, cache, device))
    return {(m, t): on_grid[(m, t, t)] for m in models for t in tasks}, on_grid


def measure_source(models: dict[str, DualEncoder], tasks: dict[str, TaskSpec], finetuned: Callable[[str, str], DualEncoder],
                   model: str, source_task: str, cache=None, device="cpu") -> dict:
    """{(model, source_task, task): descriptor} of one source fine-tune on every task's grid (through `cache`,
    an EmbeddingCache: a launch's job measures one source and the main process reads it back)."""
    from ...measurement import EmbeddingCache, measure, require_change

    cache = cache or EmbeddingCache()
    ft = finetuned(model, source_task)
    out = {}
    for task, spec in tasks.items():
        with warnings.catch_warnings():
            if task == source_task:  # an unchanged source is refused below, naming it
                warnings.simplefilter("ignore", ZeroDescriptorWarning)
            out[(model, source_task, task)] = measure(models[model], ft, spec.probes, spec.prompts, task, cache=cache,
                                                      progress=False, device=device)
    name = getattr(ft, "source_description", None) or ft.spec
    require_change(out[(model, source_task, source_task)], f"of {model}/{source_task} ({name})")
    return out


@contextmanager
def torch_threads(n: int):
    """Run torch on `n` threads inside the block; the count before is restored after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class MeasuredGrids(Mapping):
    """`measure_on_grids` run on first use: (model, task) -> descriptor, as a read-only mapping.

    The keys are known without measuring (every model x task); the first lookup measures every source
    fine-tune on every task's grid at once (the same calls, in the same order, as measuring eagerly),
    with torch's thread count of when the mapping was made: a lookup from inside a single-threaded fast
    path gives the same floats as the setup would have measured.
    `cosines()` is the descriptor-cosine diagnostics (`diagnostics.descriptor_cosines`) once measured,
    and an empty dict before: a run that used no descriptor reports none.
    """

    def __init__(self, models: dict[str, DualEncoder], tasks: dict[str, TaskSpec], finetuned: Callable[[str, str], DualEncoder],
                 progress: bool = True, device="cpu"):
        self._args = (models, tasks, finetuned, progress, device)
        self._keys = [(m, t) for m in models for t in tasks]
        self._threads = torch.get_num_threads()
        self._descriptors: dict | None = None
        self._on_grid: dict | None = None
        self._cosines: dict | None = None

    @property
    def measured(self) -> bool:
        return self._descriptors is not None

    def _measure(self) -> dict:
        if self._descriptors is None:
            with torch_threads(self._threads):
                self._descriptors, self._on_grid = measure_on_grids(*self._args)
        return self._descriptors

    def __getitem__(self, key: tuple[str, str]) -> Descriptor:
        return self._measure()[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._keys

    def source_jobs(self) -> list:
        """One job per source fine-tune (`distributed.Job`) that measures it on every grid into the embedding
        cache; [] once measured here. A launch spreads them, then every process measures from the cache."""
        from ...distributed import Job

        if self.measured:
            return []
        models, tasks, finetuned, _, device = self._args

        def job(model: str, source_task: str):
            def run() -> str:
                with torch_threads(self._threads):
                    measure_source(models, tasks, finetuned, model, source_task, device=device)
                return "measured"

            return Job(f"descriptors of {model}'s {source_task} fine-tune", run,
                       cost=sum(len(spec.probes) for spec in tasks.values()))

        return [job(m, t) for m in models for t in tasks]

    def cosines(self) -> dict:
        if not self.measured:
            return {}
        if self._cosines is None:
            models, tasks = self._args[0], self._args[1]
            self._cosines = descriptor_cosines(list(models), list(tasks), self._on_grid)
        return self._cosines


class GridDiagnostics(Mapping):
    """A setup's `diagnostics` that are the descriptor cosines of its `MeasuredGrids`, read when the run ends."""

    def __init__(self, grids: MeasuredGrids):
        self.grids = grids

    def __getitem__(self, key: str):
        return self.grids.cosines()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.grids.cosines())

    def __len__(self) -> int:
        return len(self.grids.cosines())
