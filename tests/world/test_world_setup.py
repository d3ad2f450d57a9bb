"""The world as an ExperimentSetup: its source descriptors are measured when an experiment first needs one."""

import torch

from platonic.experiments import run_experiments
from platonic.experiments.engine.fastpath import single_thread
from platonic.experiments.engine.setup import measure_on_grids
from platonic.experiments.setups.world import world_parts, world_setup

MODELS, TASKS = ["vit-a", "vit-b"], ["fashion", "digits"]


def test_world_descriptors_are_measured_on_first_use_and_equal_eager_ones(tiny_world):
    setup = world_setup(models=MODELS, tasks=TASKS, path=tiny_world["path"], progress=False)
    grids = setup.descriptors
    assert not grids.measured and set(grids) == {(m, t) for m in MODELS for t in TASKS} and len(grids) == 4
    assert dict(setup.diagnostics) == {}  # no descriptor measured: no descriptor cosines reported
    d = grids[("vit-b", "digits")]
    assert grids.measured and set(dict(setup.diagnostics)) == {"cosine", "cosine_matrices"}
    eager, _ = measure_on_grids(setup.models, setup.tasks, world_parts(tiny_world["path"], models=MODELS).finetuned,
                                progress=False)
    assert set(eager) == set(grids) and torch.equal(eager[("vit-b", "digits")].matrix, d.matrix)


def test_a_lookup_inside_a_single_threaded_fast_path_measures_with_the_setups_threads(tiny_world, monkeypatch):
    from platonic.experiments.engine import setup as setup_module

    threads, real = [], setup_module.measure_on_grids
    monkeypatch.setattr(setup_module, "measure_on_grids", lambda *a: threads.append(torch.get_num_threads()) or real(*a))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        setup = world_setup(models=MODELS, tasks=TASKS, path=tiny_world["path"], progress=False)
        with single_thread():  # as in a fast-path protocol: the floats must not depend on which one asks first
            setup.descriptors[("vit-a", "fashion")]
            assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert threads == [2]


def test_weight_space_on_the_world_measures_none_of_the_world_descriptors(tiny_world):
    setup = world_setup(models=MODELS, tasks=TASKS, path=tiny_world["path"], progress=False)
    results = run_experiments(setup, ["weight_space"], None, progress=False, plots=False,
                              options={"weight_space": {"val_size": 8}})
    assert {c["method"] for c in results["cells"]} == {"zero_shot", "task_arithmetic", "weight_transport", "gradfix",
                                                       "theseus", "closed_form"}  # GradFix: the world's labelled splits
    assert not setup.descriptors.measured and "cosine" not in results["diagnostics"]

