"""recipes/paper.yaml validates offline: every model spec parses, every task and control is in the registry."""

from pathlib import Path

import pytest

from platonic.data.tasks import PAPER_CONTROLS, PAPER_TASKS, known_task
from platonic.recipe.config import read_recipe
from platonic.models import check_spec
from platonic.models.card import base_model_id

PAPER = Path(__file__).resolve().parents[1] / "recipes" / "paper.yaml"


@pytest.fixture(scope="module")
def recipe():
    return read_recipe(PAPER)


def test_the_paper_recipe_names_the_six_models_by_hub_id_or_open_clip_tag(recipe):
    assert set(recipe.models) == {"clip", "openclip", "siglip", "siglip2", "metaclip", "evaclip"}
    for spec in recipe.models.values():
        check_spec(spec)  # open_clip: architecture and tag from open_clip's own tables, offline
        assert base_model_id(spec), spec  # each one is a hub repository (the exports' base_model)
    assert recipe.models["evaclip"] == "open_clip:EVA02-B-16/merged2b_s8b_b131k"


def test_the_paper_recipe_has_the_eight_tasks_and_two_controls_of_the_registry(recipe):
    assert set(recipe.tasks) == set(PAPER_TASKS) and set(recipe.controls) == set(PAPER_CONTROLS)
    assert all(known_task(t).kind == "task" for t in recipe.tasks)
    assert all(known_task(c).kind == "control" for c in recipe.controls)
    assert all(cfg.data is None for cfg in [*recipe.tasks.values(), *recipe.controls.values()])  # registry defaults


def test_the_paper_recipe_uses_the_papers_source_fine_tunes_and_strengths(recipe):
    ft = recipe.finetune
    assert (ft.mode, ft.lora_rank, ft.lora_alpha, ft.lr, ft.batch_size, ft.weight_decay) == ("lora", 4, 8.0, 1e-4, 32, 0.01)
    assert (ft.schedule, ft.epochs, ft.warmup()) == ("constant", 3, 0)  # 3 epochs at a constant lr (method.md §1.6)
    from platonic.experiments.setups import task_finetune

    per_task = {t: task_finetune(ft, t, cfg.finetune) for t, cfg in recipe.tasks.items()}
    assert per_task["sun397"].epochs == 1 and per_task["sun397"].schedule == "constant"  # SUN397: 1 epoch
    assert all(c == ft for t, c in per_task.items() if t != "sun397")
    edits = {e.name: e for e in recipe.edits}
    assert len(edits["addition"].terms) == 28 and edits["addition"].alpha == 0.5
    assert all(list(c.values()) == [1.0, 1.0] for c in edits["addition"].terms)
    assert len(edits["negation"].terms) == 8 and edits["negation"].alpha == 1.0
    assert len(recipe.cells_of(edits["addition"])) == 840 and len(recipe.cells_of(edits["negation"])) == 240
    assert len(recipe.needed_sources()) == 48  # 6 models x 8 tasks


def test_the_paper_setup_names_the_recipes_models_tasks_and_source_fine_tunes(recipe):
    """recipes/paper-setup.yaml (the protocols' own grids, docs/reproduce.md) reads the recipe's cached sources."""
    from platonic.experiments.setups.schema import read_config

    setup = read_config(PAPER.with_name("paper-setup.yaml"))
    assert setup.models == recipe.models and setup.finetune == recipe.finetune
    assert {k: v.model_dump() for k, v in setup.tasks.items()} == {k: v.model_dump() for k, v in recipe.tasks.items()}
    assert set(setup.controls) == set(recipe.controls)
    assert (setup.probes_per_class, setup.probe_seed, setup.control_per_class) == (30, 42, 10)
