"""Fine-tunes from the fine-tune cache as a setup's task vectors and descriptor sources (issue 13).

`CachedSources` gives, for every (model, task) of a setup and any OrthoReg weight lambda (0: plain),

    tau(model, task, lambda)          = theta_ft - theta_0 of one `platonic.finetuning.finetune` run (a TaskVector)
    finetuned(model, task, lambda)    = theta_0 + tau (a copy of the model)
    descriptor(model, task, lambda)   = UTD (N, M) of that fine-tune on the task's probes x prompts

each fine-tune read from (or written to) the cache of `experiments.engine.finetune_cache`, keyed by the model,
the task's train split and prompts and the whole `FinetuneConfig` (flavour, lambda, steps, lr, seed, ...).
So `platonic experiment weight_space`, `orthoreg_sources` and `task_arithmetic` share fine-tunes: a
re-run, or another experiment with the same recipe, reads what exists.

The world's and the toy setup's `baselines["finetunes"]` is one of these; `baselines["task_vector"]`
is its `task_vector` at lambda 0.
"""

from __future__ import annotations

from typing import Callable

from ...errors import InvalidInputError
from ...finetuning.training import FinetuneConfig
from ...task_vector import TaskVector
from .finetune_cache import cached_task_vector, finetuned_model


class CachedSources:
    """Cached fine-tunes of `models` on `tasks`.

    models: name -> pre-trained DualEncoder; tasks: name -> TaskSpec (probes and prompts);
    train: task -> (inputs (n, ...) canonical, labels (n,)) the labelled train split;
    config(task, lam) -> the FinetuneConfig of that task's fine-tune at OrthoReg weight `lam` (0: plain);
    recipe: a JSON-able description of `config`, recorded in results.json.
    `counts` says how many fine-tunes were trained and how many were read from the cache.
    """

    def __init__(self, models: dict, tasks: dict, train: dict, config: Callable[[str, float], FinetuneConfig],
                 recipe: dict | None = None):
        self.models, self.tasks, self.train, self.config = models, tasks, train, config
        self.recipe = recipe or {}
        self.counts = {"trained": 0, "cached": 0}
        self._taus: dict[tuple[str, str, float], TaskVector] = {}
        self._descriptors: dict = {}

    def _check(self, model: str, task: str, lam: float) -> None:
        if model not in self.models or task not in self.tasks:
            raise InvalidInputError(f"no fine-tune source for {model}/{task}; this setup has models "
                                    f"{', '.join(self.models)} and tasks {', '.join(self.tasks)}")
        if lam != 0 and not 0.1 <= lam <= 100:
            raise InvalidInputError(f"OrthoReg's lambda must be 0 (plain) or within [0.1, 100] (method.md §2); got {lam:g}")

    def task_vector(self, model: str, task: str, lam: float = 0.0) -> TaskVector:
        """tau of `model` fine-tuned on `task` with OrthoReg weight `lam` (cached on disk and in memory)."""
        lam = float(lam)
        self._check(model, task, lam)
        key = (model, task, lam)
        if key not in self._taus:
            inputs, labels = self.train[task]
            tau, hit = cached_task_vector(self.models[model], task, inputs, labels, self.tasks[task].prompts,
                                          self.config(task, lam))
            self.counts["cached" if hit else "trained"] += 1
            self._taus[key] = tau
        return self._taus[key]

    def finetuned(self, model: str, task: str, lam: float = 0.0):
        """theta_0 + tau as a new DualEncoder (the pre-trained model is left as it is)."""
        return finetuned_model(self.models[model], self.task_vector(model, task, lam), self.config(task, lam).mode)

    def descriptor(self, model: str, task: str, lam: float = 0.0):
        """The UTD (N, M) of the fine-tune on `task`'s own probes and prompts (method.md §1.1)."""
        from ...measurement import measure

        key = (model, task, float(lam))
        if key not in self._descriptors:
            spec = self.tasks[task]
            self._descriptors[key] = measure(self.models[model], self.finetuned(model, task, lam), spec.probes,
                                             spec.prompts, task, progress=False)
        return self._descriptors[key]

    def descriptors(self, lam: float = 0.0) -> dict:
        """(model, task) -> descriptor of every model's fine-tune on every task at `lam`."""
        return {(m, t): self.descriptor(m, t, lam) for m in self.models for t in self.tasks}

    def describe(self) -> dict:
        return {"recipe": self.recipe, **self.counts}
