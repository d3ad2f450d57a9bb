"""A small synthetic ExperimentSetup of real DualEncoders, for testing the protocols in seconds.

Inputs are latent vectors x in R^k (not images). Each class has a centroid; each task is a group of
classes; the task's "fine-tune" is the latent edit x -> (I + beta P_t) x with P_t the projection onto
the task's centroid span, seen by every model through its own towers. Models differ in width and
weights; their last Linear is fitted so that z(x) ~ Q_m x, and prompts embed as Q_m mu_c.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from ...descriptor import Descriptor, ProbeGrid, Provenance
from ...edit import EditSite, LinearSite
from ...errors import InvalidInputError
from ...finetuning.training import FinetuneConfig, finetune
from ...models.base import DualEncoder
from ..engine.diagnostics import descriptor_cosines
from ..engine.setup import EvalSet, ExperimentSetup, TaskSpec
from ..engine.sources import CachedSources


class ToyDualEncoder(DualEncoder):
    """tower: R^k -> R^d (Linear, Tanh, Linear); text: prompt -> Q mu_c. `edit` applies a latent fine-tune."""

    modality = "latent"

    def __init__(self, name: str, tower: nn.Sequential, text: dict[str, torch.Tensor], edit: torch.Tensor | None = None):
        self.spec = f"toy:{name}"
        self._tower = tower
        self._text = text
        self._site = LinearSite(tower[2])
        self.latent_edit = edit

    @property
    def tower(self) -> nn.Module:
        return self._tower

    @property
    def edit_site(self) -> EditSite:
        return self._site

    def canonical(self, probes) -> torch.Tensor:
        if not isinstance(probes, torch.Tensor) or probes.ndim != 2 or not probes.is_floating_point():
            raise InvalidInputError("toy probes are float latent vectors (N, k)")
        return probes.contiguous()

    def prepare_probes(self, probes: torch.Tensor) -> torch.Tensor:
        return probes if self.latent_edit is None else probes @ self.latent_edit.T

    def _forward_tower(self, inputs: torch.Tensor) -> torch.Tensor:
        return self._tower(inputs)

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        return torch.stack([self._text[t] for t in texts])

    def architecture_id(self) -> str:
        return f"toy/{[tuple(p.shape) for p in self._tower.parameters()]}"

    def save(self, path, provenance=None) -> None:
        raise InvalidInputError("toy models are synthetic and have no file format; export a real model instead")

    def finetuned(self, edit: torch.Tensor) -> "ToyDualEncoder":
        return ToyDualEncoder(self.spec.removeprefix("toy:") + "-ft", self._tower, self._text, edit)


def toy_setup(seed: int = 0, k: int = 24, classes: int = 5, widths=((48, 32), (64, 40), (80, 24)),
              noise: float = 1.6, beta: float = 1.5) -> ExperimentSetup:
    """Tasks t0..t3 (t1, t2 a related group, t3 the held-out related task), controls c0, c1, one model per width."""
    g = torch.Generator().manual_seed(seed)
    n_tasks = 4
    groups = [f"t{i}" for i in range(n_tasks)] + ["c0", "c1"]
    centroids = {grp: torch.randn(classes, k, generator=g) for grp in groups}
    # t1, t2 are a related group and t3 the held-out related task: their class centroids are neighbours
    centroids["t2"] = centroids["t1"] + 0.6 * torch.randn(classes, k, generator=g)
    centroids["t3"] = 0.5 * (centroids["t1"] + centroids["t2"]) + 0.5 * torch.randn(classes, k, generator=g)
    prompts = {grp: tuple(f"a photo of {grp} class {c}." for c in range(classes)) for grp in groups}
    pretrain = 1.5 * torch.randn(4096, k, generator=g)
    models = {}
    for i, (w, d) in enumerate(widths):
        Q = torch.randn(d, k, generator=g) / k**0.5
        tower = nn.Sequential(nn.Linear(k, w), nn.Tanh(), nn.Linear(w, d))
        with torch.no_grad():
            tower[0].weight.copy_(torch.randn(w, k, generator=g) / k**0.5)
            tower[0].bias.zero_()
            h = torch.cat([tower[1](tower[0](pretrain)), torch.ones(len(pretrain), 1)], dim=1)
            fit = torch.linalg.lstsq(h, pretrain @ Q.T).solution
            tower[2].weight.copy_(fit[:-1].T)
            tower[2].bias.copy_(fit[-1])
        text = {p: centroids[grp][c] @ Q.T for grp in groups for c, p in enumerate(prompts[grp])}
        models[f"m{i}"] = ToyDualEncoder(f"m{i}", tower, text)

    def draw(grp, per_class, s):
        gen = torch.Generator().manual_seed(s)
        labels = torch.arange(classes).repeat_interleave(per_class)
        return centroids[grp][labels] + noise * torch.randn(len(labels), k, generator=gen), labels

    tasks, edits = {}, {}
    for i, grp in enumerate(groups[:n_tasks]):
        probes, _ = draw(grp, 30, 1000 + i)
        x, y = draw(grp, 60, 2000 + i)
        xv, yv = draw(grp, 30, 5000 + i)
        tasks[grp] = TaskSpec(grp, prompts[grp], probes, EvalSet(grp, x, y, prompts[grp]), EvalSet(f"{grp}/val", xv, yv, prompts[grp]))
        basis, _ = torch.linalg.qr(centroids[grp].T)
        edits[grp] = torch.eye(k) + beta * basis @ basis.T
    controls = {}
    for i, grp in enumerate(groups[n_tasks:]):
        x, y = draw(grp, 60, 3000 + i)
        controls[grp] = EvalSet(grp, x, y, prompts[grp])
    on_grid = {}  # (model, fine-tune task, grid task) -> descriptor
    for name, model in models.items():
        for source_task in tasks:
            ft = model.finetuned(edits[source_task])
            for task, spec in tasks.items():
                with torch.no_grad():
                    f_pre, f_ft = model.tower(spec.probes), ft.tower(ft.prepare_probes(spec.probes))
                grid = ProbeGrid.from_probes(task, spec.prompts, spec.probes)
                on_grid[(name, source_task, task)] = Descriptor.from_embeddings(
                    f_pre, f_ft, model.encode_texts(spec.prompts), grid,
                    Provenance(source=model.spec, finetune=f"latent edit {source_task}"))
    descriptors = {(m, t): on_grid[(m, t, t)] for m in models for t in tasks}
    train = {t: draw(t, 40, 4000 + i) for i, t in enumerate(tasks)}
    base = FinetuneConfig(steps=30, lr=3e-3, batch_size=40, weight_decay=0.0, logit_scale=20.0)
    # short labelled fine-tunes of each model on each task, from the fine-tune cache (plain or OrthoReg)
    sources = CachedSources(models, tasks, train, lambda task, lam: base.model_copy(update={"orthoreg": lam}),
                            {"flavour": "full", **base.model_dump(mode="json")})

    def gradient_ascent(model: str, task: str, steps: int | None = None):
        x, y = draw(task, 40, 4000 + list(tasks).index(task))
        cfg = FinetuneConfig(steps=steps or 10, lr=3e-3, batch_size=40, weight_decay=0.0, logit_scale=20.0, ascent=True)
        return finetune(models[model], x, y, tasks[task].prompts, cfg, progress=False)[0]

    return ExperimentSetup("toy", models, tasks, controls, descriptors, related_group=("t1", "t2"), held_out="t3",
                           baselines={"task_vector": sources.task_vector, "gradient_ascent": gradient_ascent, "finetunes": sources,
                                      "labelled": train.__getitem__},
                           diagnostics=descriptor_cosines(list(models), list(tasks), on_grid))
