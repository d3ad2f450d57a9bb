"""weight_space and orthoreg_sources on the fine-tune cache (issue 13): choices on validation only, cache
re-use, the OrthoReg-source table, and the errors of their options."""

import json
from dataclasses import replace

import pytest
import torch

from platonic.errors import InvalidInputError, PlatonicError
from platonic.experiments import run_experiments
from platonic.experiments.protocols.orthoreg_sources import METHODS
from platonic.experiments.protocols import WEIGHT_ALPHAS
from platonic.experiments.tables import orthoreg_summary
from platonic.experiments.engine.setup import EvalSet, ExperimentSetup
from platonic.experiments.setups.toy import toy_setup

PAIR = ((48, 32), (48, 32), (64, 40))  # m0 and m1 share an architecture


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))


def _shuffled(setup: ExperimentSetup) -> ExperimentSetup:
    """The same setup with every test split's and control's labels permuted (val splits untouched)."""
    def shuffle(s: EvalSet, seed: int) -> EvalSet:
        perm = torch.randperm(len(s.labels), generator=torch.Generator().manual_seed(seed))
        return EvalSet(s.name, s.inputs, s.labels[perm], s.prompts)

    tasks = {n: replace(t, test=shuffle(t.test, i)) for i, (n, t) in enumerate(setup.tasks.items())}
    controls = {n: shuffle(c, 100 + i) for i, (n, c) in enumerate(setup.controls.items())}
    return replace(setup, tasks=tasks, controls=controls)


def _alphas(results) -> dict:
    return {(c["method"], c["target"], c["sources"][0], *c["tasks"]): c["alpha"]
            for c in results["cells"] if c["method"] in ("task_arithmetic", "weight_transport")}


def test_weight_space_alpha_never_sees_test_labels_and_reuses_the_fine_tune_cache(tmp_path):
    setup = toy_setup(widths=PAIR)
    logs = []
    clean = run_experiments(setup, ["weight_space"], None, progress=False, plots=False, log=logs.append)
    assert setup.baselines["finetunes"].counts == {"trained": 8, "cached": 0}  # the pair's 2 models x 4 tasks, once each
    assert any(line.startswith("alpha on validation") or "alpha on validation" in line for line in logs)
    for phase in ("fine-tunes (or cache reads)", "zero-shot encodes", "alpha on validation", "test at the chosen alpha"):
        assert f"weight_space: {phase}" in clean["timings"]
    assert all(a in WEIGHT_ALPHAS for a in _alphas(clean).values())
    assert any(a > 0 for a in _alphas(clean).values())  # the choice is not trivially zero-shot

    again = toy_setup(widths=PAIR)  # a new setup object: everything comes from the disk cache
    shuffled = run_experiments(_shuffled(again), ["weight_space"], None, progress=False, plots=False)
    assert again.baselines["finetunes"].counts == {"trained": 0, "cached": 8}
    assert _alphas(clean) == _alphas(shuffled)  # every alpha unchanged by the test labels
    acc = lambda r: [c["accuracy"]["A"] for c in r["cells"] if c["method"] == "task_arithmetic"]  # noqa: E731
    assert acc(clean) != acc(shuffled)  # while the reported test accuracies did change


def test_weight_space_records_its_validation_cap_and_all_means_whole_splits(tmp_path):
    from typer.testing import CliRunner

    from platonic.cli import app
    from platonic.experiments.protocols import WEIGHT_SPACE_VAL_SIZE

    for args, recorded in (([], WEIGHT_SPACE_VAL_SIZE), (["--val-size", "all"], None), (["--val-size", "7"], 7)):
        out = tmp_path / f"run{len(args)}{recorded}"
        result = CliRunner().invoke(app, ["experiment", "weight_space", "--setup", "toy", "--no-plots", *args, "-o", str(out)])
        assert result.exit_code == 0, result.output
        settings = json.loads((out / "results.json").read_text())["settings"]["protocols"]["weight_space"]
        assert settings["val_size"] == recorded


def test_weight_space_closed_form_uses_the_task_vectors_own_fine_tunes():
    setup = toy_setup(widths=PAIR)
    sources = setup.baselines["finetunes"]
    results = run_experiments(setup, ["weight_space"], None, progress=False, plots=False, options={"weight_space": {"val_size": 10}})
    assert results["settings"]["protocols"]["weight_space"]["val_size"] == 10
    cf = [c for c in results["cells"] if c["method"] == "closed_form"]
    assert cf and {(c["sources"][0], c["target"]) for c in cf} == {("m0", "m1"), ("m1", "m0")}
    d = sources.descriptor("m0", "t0")
    assert d.matrix.shape == (len(setup.tasks["t0"].probes), len(setup.tasks["t0"].prompts))
    # the descriptor of theta_0 + tau is what the cached task vector did on the probes
    ft = sources.finetuned("m0", "t0")
    assert not torch.equal(ft.module.state_dict()["0.weight"], setup.models["m0"].module.state_dict()["0.weight"])


def test_orthoreg_sources_table_and_lambda_never_sees_test_labels(tmp_path):
    setup = toy_setup()
    opts = {"orthoreg_sources": {"lambdas": [1.0, 10.0]}}
    clean = run_experiments(setup, ["orthoreg_sources"], tmp_path / "run", progress=False, plots=False, options=opts)
    diag = clean["diagnostics"]["orthoreg_sources"]
    assert diag["chosen_lambda"] in (1.0, 10.0) and set(diag["validation"]) == {"0", "1", "10"}
    assert setup.baselines["finetunes"].counts["trained"] == 3 * 4 * 3  # models x tasks x (plain + two lambdas)
    cells = clean["cells"]
    assert {c["method"] for c in cells} == set(METHODS)
    n_pairs, n_models = 6, 3
    for kind in ("plain", "orthoreg"):
        mine = [c for c in cells if c["method"] == f"{kind}_sources"]
        assert len(mine) == n_models * n_pairs * (n_models - 1) ** 2
        assert all(c["target"] not in c["sources"] for c in mine)
        assert {c["lambda"] for c in mine} == {0.0 if kind == "plain" else diag["chosen_lambda"]}
    rows = orthoreg_summary(cells, list(setup.controls))
    assert set(rows) == {"plain", "orthoreg"} and rows["plain"]["retention"] == rows["plain"]["retention_vs_plain_oracle"]
    tables = (tmp_path / "run" / "tables.md").read_text()
    assert "Plain vs OrthoReg descriptor sources" in tables and "control loss" in tables

    again = toy_setup()
    shuffled = run_experiments(_shuffled(again), ["orthoreg_sources"], None, progress=False, plots=False, options=opts)
    assert again.baselines["finetunes"].counts == {"trained": 0, "cached": 36}  # all from the cache
    assert shuffled["diagnostics"]["orthoreg_sources"]["validation"] == diag["validation"]
    assert shuffled["diagnostics"]["orthoreg_sources"]["chosen_lambda"] == diag["chosen_lambda"]


def test_cached_source_options_are_checked():
    setup = toy_setup()
    with pytest.raises(InvalidInputError, match="lambda"):
        run_experiments(setup, ["orthoreg_sources"], None, progress=False, plots=False,
                        options={"orthoreg_sources": {"lambdas": [0.01]}})
    with pytest.raises(InvalidInputError, match="do not apply to addition"):
        run_experiments(setup, ["addition"], None, progress=False, plots=False, options={"addition": {"val_size": 5}})
    with pytest.raises(InvalidInputError, match="not among the experiments run"):
        run_experiments(setup, ["addition"], None, progress=False, plots=False, options={"weight_space": {"val_size": 5}})
    bare = replace(setup, baselines={})
    with pytest.raises(InvalidInputError, match="fine-tune cache"):
        run_experiments(bare, ["orthoreg_sources"], None, progress=False, plots=False)
    with pytest.raises(InvalidInputError, match=r"\[0.1, 100\]"):
        setup.baselines["finetunes"].task_vector("m0", "t0", 0.05)
    with pytest.raises(InvalidInputError, match="no fine-tune source"):
        setup.baselines["finetunes"].task_vector("m9", "t0")


@pytest.mark.parametrize("args,match", [
    (["addition", "--lambdas", "1"], "--lambdas applies"),
    (["addition", "--val-size", "10"], "--val-size applies"),
    (["addition", "--flavours", "full"], "task_arithmetic experiment only"),
    (["weight_space", "--steps", "0"], "--steps"),
    (["weight_space", "--setup", "toy", "--val-size", "0"], "--val-size takes a positive number of items or 'all'"),
    (["weight_space", "--setup", "toy", "--val-size", "most"], "--val-size takes a positive number of items or 'all'"),
    (["weight_space", "--setup", "toy", "--models", "m0"], "embedded world"),
    (["orthoreg_sources", "--setup", "toy", "--lambdas", "x"], "comma-separated numbers"),
    (["addition", "--merges", "ties"], "task_arithmetic experiment only"),
    (["task_arithmetic", "--merges", "sum,magic"], "unknown merge rule 'magic'"),
    (["weight_space", "--sources", "consensus"], "--sources applies to addition and negation"),
    (["addition", "--setup", "toy", "--sources", "mean"], "--sources is one of single, consensus, both"),
])
def test_cli_refuses_options_that_do_not_apply(args, match, tmp_path):
    from typer.testing import CliRunner

    from platonic.cli import app

    result = CliRunner().invoke(app, ["experiment", *args, "-o", str(tmp_path / "out")])
    assert result.exit_code != 0
    assert match in " ".join(result.output.split())


def test_world_setup_refuses_unknown_models_and_tasks_before_loading(tmp_path):
    from platonic.experiments.setups.world import world_setup

    with pytest.raises(PlatonicError, match="unknown world model"):
        world_setup(models=["nope"], path=tmp_path)
    with pytest.raises(PlatonicError, match="unknown world task"):
        world_setup(tasks=["fashion", "nope"], path=tmp_path)
    with pytest.raises(PlatonicError, match="at least two tasks"):
        world_setup(tasks=["fashion"], path=tmp_path)


def test_world_sources_use_the_task_arithmetic_recipe_so_the_cache_is_shared():
    """The world's cached sources key each task by its index among all the world's tasks, with the
    task_arithmetic TaskVectorRecipe's full-flavour config: a sliced run, weight_space and task_arithmetic --flavours
    full of the same recipe ask the cache for the same entries."""
    from types import SimpleNamespace

    from platonic.experiments.engine.weight_space import TaskVectorRecipe
    from platonic.experiments.setups.world import world_sources
    from platonic.world.image import data as wd

    recipe = TaskVectorRecipe(steps=48)
    world = SimpleNamespace(train=lambda task: (None, None))  # the parts' labelled train split of a task
    sliced = world_sources(world, {}, {"shapes": None, "textures": None}, recipe)
    for lam in (0.0, 1.0):
        assert sliced.config("shapes", lam) == recipe.config("full", lam, list(wd.TASK_NAMES).index("shapes"))
    assert sliced.recipe["flavour"] == "full" and sliced.recipe["steps"] == 48
