"""The image world on pretrained trunks as an ExperimentSetup (`--setup trunk-world`): its three open_clip models,
the image world's eight tasks (harder shapes and textures) and two controls, its last-stage sources.

It is read as the image world is (`setups.world.world_parts`), with models and sources loaded as
`world:trunk/NAME[/TASK[/lora]]` (platonic's open_clip encoders of the built directories). Its gradient-ascent
negation baseline trains what its full sources train, the tower above the cut, on the build's cached activations
(`GRADIENT_ASCENT`'s budget; seconds a model and task, where the whole tower took about 50 s).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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


def trunk_world_parts(path: Path, models=None) -> TrunkWorldParts:
    """Load the built trunk world at `path` (models: the names to load, default all)."""
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
    from ...world.image.trunkworld.recipe import MODEL_NAMES

    check_names("trunk world", models, tasks, MODEL_NAMES, wd.TASK_NAMES)
    if path is None:
        path = ensure_trunk_world(profile, seed, progress=progress, kinds=(source_kind,))
    else:
        path = ensure_sources(path, (source_kind,), progress=progress)
    world = trunk_world_parts(path, models=list(models) if models else None)
    return parts_setup(world, "trunk world", wd.TASK_NAMES, wd.RELATED_GROUP, wd.HELD_OUT_RELATED, tasks, source_kind,
                       recipe, progress, ascend=world.ascend, ascent_label=", gradient ascent: last stage + head")
