"""Experiments on user-named real architectures: a YAML setup or command-line options -> a run directory."""

import json

import pytest
from image_folders import setup_yaml
from typer.testing import CliRunner

from platonic import InvalidInputError
from platonic.cli import app
from platonic.experiments.setups import config_from_options, read_config

@pytest.mark.slow
def test_yaml_setup_runs_the_protocols_on_real_architectures(world_on_disk):
    path = setup_yaml(world_on_disk)
    out = world_on_disk / "run"
    result = CliRunner().invoke(app, ["experiment", "addition", "negation", "generalization", "--setup", str(path),
                                      "-o", str(out), "--no-plots"])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert results["setup"]["name"] == "two real architectures"
    assert set(results["setup"]["models"]) == {"vit", "vit2"}
    assert results["setup"]["tasks"]["reds"] == {"classes": 2, "probes": 6, "test": 6}
    assert results["setup"]["controls"]["mixed"] == {"classes": 3, "test": 6}
    kinds = {(c["experiment"], c["method"]) for c in results["cells"]}
    assert ("addition", "closed_form") in kinds and ("negation", "gradient_ascent") in kinds
    assert any(c["experiment"] == "generalization" for c in results["cells"])
    cross = [c for c in results["cells"] if c["experiment"] == "addition" and c["method"] == "closed_form"]
    # 2 targets x 3 task pairs x 1 other source per slot
    assert len(cross) == 6 and all(c["target"] not in c["sources"] for c in cross)
    assert "two real architectures" in (out / "tables.md").read_text()


def test_relative_paths_are_read_from_the_yaml_folder(world_on_disk):
    config = read_config(setup_yaml(world_on_disk))
    assert config.tasks["reds"].data == world_on_disk / "data" / "reds"
    assert config.sources["vit"]["reds"] == str(world_on_disk / "ft" / "vit-reds.safetensors")
    assert config.gradient_ascent.ascent, "the negation baseline always ascends"


@pytest.mark.parametrize("change,message", [
    ({"finetune": None}, "no fine-tuned source for vit/blues"),
    ({"held_out": "purples"}, "unknown task(s) purples"),
    ({"tasks": {"reds": {"data": "data/reds", "template": "a photo"}}}, "exactly one '{}'"),
    ({"models": {"vit": "open_clip:ViT-S-32"}}, "at least two models"),
    ({"sources": {"clip": {"reds": "x"}}}, "names model 'clip'"),
])
def test_a_bad_setup_names_the_problem(world_on_disk, change, message):
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("{", r"\{").replace("}", r"\}")):
        read_config(setup_yaml(world_on_disk, **change))


def test_a_missing_data_folder_is_named_before_any_model_runs(world_on_disk):
    from platonic.experiments.setups import config_setup

    config = read_config(setup_yaml(world_on_disk, tasks={"reds": {"data": "nowhere"}}, related_group=[], held_out=None,
                                    sources={}))
    with pytest.raises(InvalidInputError, match="data folder of 'reds' not found"):
        config_setup(config, progress=False)


def test_command_line_options_make_or_extend_a_setup(world_on_disk):
    data = world_on_disk / "data"
    config = config_from_options(["a=open_clip:ViT-S-32", "b=open_clip:RN50"], [f"reds={data / 'reds'}"], [],
                                 ["a/reds=ft.safetensors", "b/reds=other.safetensors"])
    assert config.models == {"a": "open_clip:ViT-S-32", "b": "open_clip:RN50"}
    assert config.sources == {"a": {"reds": "ft.safetensors"}, "b": {"reds": "other.safetensors"}}
    extended = config_from_options(["c=open_clip:RN50"], [], [], [], read_config(setup_yaml(world_on_disk)))
    assert list(extended.models) == ["vit", "vit2", "c"]
    with pytest.raises(InvalidInputError, match="write MODEL/TASK=FINETUNE"):
        config_from_options(["a=x", "b=y"], [f"reds={data}"], [], ["a=ft.safetensors"])
    result = CliRunner().invoke(app, ["experiment", "addition", "--setup", "toy", "--model", "a=x"])
    assert result.exit_code != 0 and "cannot be added to the toy setup" in result.output


@pytest.mark.slow
def test_a_one_task_setup_with_listed_and_made_sources(world_on_disk):
    from platonic.experiments.setups import config_setup

    config = read_config(setup_yaml(world_on_disk, tasks={"reds": {"data": "data/reds"}}, related_group=[], held_out=None))
    setup = config_setup(config, progress=False)
    listed = setup.baselines["task_vector"]("vit", "reds")
    changed = {k for k, v in listed.deltas.items() if v.abs().max() > 0}
    assert changed == {"visual.proj"}  # the listed partial state dict changed only the projection
    made = setup.baselines["task_vector"]("vit2", "reds")  # a LoRA fine-tune made by the `finetune` block
    assert made.norm() > 0
    assert setup.descriptors[("vit2", "reds")].norm() > 0
    # one task: negation runs and the cosine table has no cross-task figure to show
    from platonic.experiments import run_experiments

    run_experiments(setup, ["negation"], world_on_disk / "run", progress=False, plots=False)
    tables = (world_on_disk / "run" / "tables.md").read_text()
    assert "### Negation" in tables and "| reds |" in tables and tables.split("| reds |")[1].split("\n")[0].strip().endswith("| - |")
