"""The image world on pretrained trunks as an ExperimentSetup (`--setup trunk-world`): its three open_clip models
(and, named with `--models`, its towers trained from scratch: `trunkworld.recipe.STUDENT_NAMES`, built on first
use), the image world's eight tasks (harder shapes and textures), three controls (`trunkworld.recipe.CONTROL_NAMES`:
objects, symbols and the emoji of 100 things), its last-stage sources.

It is read as the image world is (`setups.world.world_parts`), with models and sources loaded as
`world:trunk/NAME[/TASK[/lora]]` (platonic's open_clip encoders of the built directories). Its gradient-ascent
negation baseline trains what its full sources train, the tower above the cut, on the build's cached activations
(`GRADIENT_ASCENT`'s budget; seconds a model and task, where the whole tower took about 50 s). Its cached
fine-tunes (`baselines["finetunes"]`: the weight-space task vectors, OrthoReg sources) train the same part, on its
models frozen below the cut (`FrozenModels`); their task vectors apply to the open_clip models as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from ..engine.setup import ExperimentSetup
from .world import DEFAULT_SOURCE_KIND, WorldParts, check_names, image_world_sets, parts_setup, world_data


@dataclass
class TrunkWorldParts(WorldParts):
    """A built trunk world seen by the engine (as `WorldParts`; models are open_clip encoders)."""

    def finetuned(self, model: str, task: str, kind: str = DEFAULT_SOURCE_KIND):
        """The source of `model` on `task` ("full": last stage + head | "lora")."""
        from ...world.backend import load_world_model

        return load_world_model(f"trunk/{model}/{task}" + ("" if kind == "full" else f"/{kind}"), root=self.path)

    def ascend(self, model: str, task: str, steps: int | None = None):
        """`model` after the gradient-ascent baseline on `task`'s train split, on the part above the cut (what the
        world's full sources train; `trunkworld.backend.ascended_trunk_model`); steps: the budget (default
        `GRADIENT_ASCENT`'s)."""
        from ...finetuning.config import GRADIENT_ASCENT
        from ...world.image.trunkworld.backend import ascended_trunk_model

        config = GRADIENT_ASCENT if steps is None else GRADIENT_ASCENT.model_copy(update={"steps": steps})
        return ascended_trunk_model(self.models[model], self.path, task, self.data[task].train.labels,
                                    self.tasks[task].prompts, config)


class FrozenModels(Mapping):
    """name -> the trunk world model frozen below the cut (`trunkworld.frozen_trunk_model`), made on first use, with
    the build's train activations kept (no train image runs through the trunk again)."""

    def __init__(self, world: TrunkWorldParts):
        self.world, self._made, self._images = world, {}, {}

    def __getitem__(self, name: str):
        if name not in self._made:
            from ...world.common.weights import load_weights
            from ...world.image.trunkworld.frozen import frozen_trunk_model

            model = self.world.models[name]  # KeyError for an unknown name, as a dict
            acts, _ = load_weights(self.world.path / "activations" / f"{name}.safetensors")
            data = self.world.data
            keep = tuple(s for s in acts if s in data and len(acts[s]) == len(data[s].train.labels))
            if keep and keep not in self._images:  # the same train images for every model: joined once
                self._images[keep] = torch.cat([data[s].train.images for s in keep])
            remember = (self._images[keep], torch.cat([acts[s] for s in keep])) if keep else None
            self._made[name] = frozen_trunk_model(model, remember)
        return self._made[name]

    def __contains__(self, name) -> bool:  # without making the model
        return name in self.world.models

    def __iter__(self):
        return iter(self.world.models)

    def __len__(self) -> int:
        return len(self.world.models)


def trunk_world_parts(path: Path, models=None) -> TrunkWorldParts:
    """Load the built trunk world at `path` (models: the names to load, default its trunk models; a student named
    is built first where it is not)."""
    from ...world.backend import load_world_model
    from ...world.image.trunkworld.recipe import MODEL_NAMES

    path = Path(path)
    data = world_data(path)
    loaded = {name: load_world_model(f"trunk/{name}", root=path) for name in (models or MODEL_NAMES)}
    return TrunkWorldParts(path, loaded, *image_world_sets(data), data)


def trunk_world_setup(profile: str | None = None, seed: int = 0, source_kind: str = DEFAULT_SOURCE_KIND,
                      progress: bool = True, models=None, tasks=None, recipe=None, path: Path | None = None) -> ExperimentSetup:
    """Build the trunk world if needed and describe it as an ExperimentSetup (arguments as `world_setup`'s)."""
    from ...world.image import data as wd
    from ...world.image.trunkworld.build import ensure_sources, ensure_trunk_world
    from ...world.image.trunkworld.recipe import MODEL_NAMES, STUDENT_NAMES

    check_names("trunk world", models, tasks, MODEL_NAMES + STUDENT_NAMES, wd.TASK_NAMES)
    if path is None:
        path = ensure_trunk_world(profile, seed, progress=progress, kinds=(source_kind,))
    else:
        path = ensure_sources(path, (source_kind,), progress=progress)
    world = trunk_world_parts(path, models=list(models) if models else None)
    return parts_setup(world, "trunk world", wd.TASK_NAMES, wd.RELATED_GROUP, wd.HELD_OUT_RELATED, tasks, source_kind,
                       recipe, progress, ascend=world.ascend, ascent_label=", gradient ascent: last stage + head",
                       finetune_models=FrozenModels(world))
