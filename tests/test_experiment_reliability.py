"""Experiments that would give a silently wrong run are refused or warned about; plots carry their numbers;
YAML setups read their paths from their own folder and check them before any model loads (issue 12)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from platonic import InvalidInputError
from platonic.cli import app


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def test_yaml_model_files_and_sources_are_read_from_the_yaml_folder(tmp_path, monkeypatch):
    from platonic.experiments.setups import read_config

    folder = tmp_path / "exp"
    (folder / "data" / "toy").mkdir(parents=True)
    (folder / "w.safetensors").write_bytes(b"x")
    (folder / "setup.yaml").write_text(
        "models: {a: 'open_clip:ViT-S-32@w.safetensors', b: 'open_clip:RN50@seed=3', c: 'hf:org/name'}\n"
        "tasks: {toy: {data: data/toy}}\n"
        "sources: {a: {toy: ft/a.safetensors}, b: {toy: 'open_clip:RN50@seed=4'}, c: {toy: /abs/c}}\n")
    monkeypatch.chdir(tmp_path)  # not the YAML's folder
    config = read_config(Path("exp/setup.yaml"))
    assert config.models["a"] == f"open_clip:ViT-S-32@{Path('exp') / 'w.safetensors'}"
    assert config.models["b"] == "open_clip:RN50@seed=3" and config.models["c"] == "hf:org/name"
    assert config.sources["a"]["toy"] == str(Path("exp") / "ft" / "a.safetensors")
    assert config.sources["b"]["toy"] == "open_clip:RN50@seed=4" and config.sources["c"]["toy"] == "/abs/c"


def test_a_missing_source_file_is_found_before_any_model_loads(tmp_path, monkeypatch):
    from platonic.experiments.setups import yaml as config_module

    (tmp_path / "data" / "toy").mkdir(parents=True)
    (tmp_path / "setup.yaml").write_text(
        "models: {a: open_clip:ViT-S-32, b: 'open_clip:RN50@weights/rn50.safetensors'}\n"
        "tasks: {toy: {data: data/toy}}\nsources: {a: {toy: ft/a.safetensors}, b: {toy: ft/b.safetensors}}\n")

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the setup's files were checked")

    monkeypatch.setattr(config_module, "load_model", no_loading)
    with pytest.raises(InvalidInputError, match=r"3 path\(s\) of the setup do not exist.*rn50.safetensors.*source a/toy.*source b/toy"):
        config_module.config_setup(tmp_path / "setup.yaml")


def test_a_class_without_train_images_is_an_error(tmp_path):
    from PIL import Image

    from platonic.experiments.setups import DataSetConfig, ExperimentConfig, read_task

    for split, classes in (("train", ["cat"]), ("test", ["cat", "dog"])):
        for c in classes:
            (tmp_path / split / c).mkdir(parents=True)
            Image.new("RGB", (8, 8)).save(tmp_path / split / c / "0.png")
    config = ExperimentConfig(models={"a": "x", "b": "y"}, tasks={"pets": {"data": tmp_path}},
                              sources={"a": {"pets": "f"}, "b": {"pets": "g"}})
    with pytest.raises(InvalidInputError, match="class\\(es\\) dog have no train images.*get no probes"):
        read_task("pets", DataSetConfig(data=tmp_path), 32, config)


def test_experiment_names_given_twice_would_double_the_cells():
    from platonic.experiments import run_experiments
    from platonic.experiments.setups.toy import toy_setup

    with pytest.raises(InvalidInputError, match="more than once"):
        run_experiments(toy_setup(), ["alpha", "alpha"], progress=False)


def test_generalization_without_a_related_group_is_an_error(tmp_path):
    import dataclasses

    from platonic.experiments import run_experiments
    from platonic.experiments.setups.toy import toy_setup

    setup = dataclasses.replace(toy_setup(), related_group=(), held_out=None)
    with pytest.raises(InvalidInputError, match="related group"):
        run_experiments(setup, ["generalization"], progress=False)


def test_a_reused_run_directory_loses_the_earlier_runs_plots(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PLATONIC_QUIET", "1")
    run = tmp_path / "run"
    assert invoke("experiment", "alpha", "--setup", "toy", "-o", run).exit_code == 0
    assert (run / "alpha_tradeoff.png").exists()
    (run / "notes.md").write_text("mine")
    result = invoke("experiment", "negation", "--setup", "toy", "-o", run)
    assert result.exit_code == 0, result.output
    assert not (run / "alpha_tradeoff.png").exists()  # stale: this run has no alpha sweep
    assert (run / "notes.md").read_text() == "mine"  # not the run's
    result = invoke("report", run, "--no-plots")
    assert result.exit_code == 0 and not list(run.glob("*.png"))


def test_plots_carry_their_numbers_and_skip_a_one_by_one_heatmap(tmp_path):
    from platonic.experiments.plots import write_plots

    block = {"title": "t", "labels": ["only"], "matrix": [[1.0]]}
    assert write_plots(tmp_path, {"cells": [], "diagnostics": {"cosine_matrices": {"tasks": block}}}) == []
    block = {"title": "t", "labels": ["a", "b"], "matrix": [[1.0, None], [0.25, 1.0]]}
    written = write_plots(tmp_path, {"cells": [], "diagnostics": {"cosine_matrices": {"tasks": block}}})
    assert [p.name for p in written] == ["cosine_tasks.png"]


def test_retention_plot_says_na_for_a_slot_without_oracle_gain(tmp_path, monkeypatch):
    import matplotlib.axes

    texts = []
    real = matplotlib.axes.Axes.text
    monkeypatch.setattr(matplotlib.axes.Axes, "text", lambda self, x, y, s, *a, **k: texts.append(s) or real(self, x, y, s, *a, **k))
    from platonic.experiments.plots import write_plots

    def cell(method, a, b):
        return {"experiment": "addition", "method": method, "target": "m", "sources": [], "tasks": ["x", "y"],
                "coefficients": [], "alpha": 0.5, "accuracy": {"A": a, "B": b}, "residuals": []}

    cells = [cell("zero_shot", 0.5, 0.5), cell("closed_form", 0.52, 0.51), cell("oracle", 0.54, 0.5)]
    written = write_plots(tmp_path, {"cells": cells, "diagnostics": {}})
    assert [p.name for p in written] == ["retention.png"]
    assert any(t.startswith("n/a") for t in texts)


def test_malformed_results_json_is_an_artifact_error(tmp_path):
    from platonic import ArtifactError
    from platonic.experiments.report import load_results

    (tmp_path / "results.json").write_text(json.dumps({"schema": "platonic.results", "version": 1, "setup": {},
                                                       "cells": [{"experiment": "addition"}]}))
    with pytest.raises(ArtifactError, match="cell 0 has no valid 'method'"):
        load_results(tmp_path)


def test_prompt_templates_take_one_slot_and_literal_braces():
    from platonic.prompts import class_prompts

    assert class_prompts("a {} (id {n})", ["cat", " dog "]) == ["a cat (id {n})", "a dog (id {n})"]
    with pytest.raises(InvalidInputError, match="has 2 '{}'"):
        class_prompts("{} vs {}", ["cat"])
