"""Experiment protocols on a small synthetic setup: the fast path is exact, reports re-render byte for byte."""

import json
from dataclasses import replace
from itertools import combinations

import pytest
import torch

from platonic.edit import fold, unfold
from platonic.experiments import run_experiments
from platonic.experiments.engine.fastpath import FeatureStore, accuracy_end_to_end
from platonic.experiments.protocols.paper import Operators
from platonic.experiments.report import SCHEMA, VERSION, load_results, render_tables
from platonic.errors import InvalidInputError
from platonic.experiments.setups.toy import toy_setup


@pytest.fixture(scope="module")
def setup():
    return toy_setup()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("target,terms,alpha", [
    ("m0", [("m1", "t0", 1.0), ("m2", "t1", 1.0)], 0.5),
    ("m1", [("m0", "t2", -1.0)], 1.0),
    ("m2", [("m0", "t1", 1.0), ("m1", "t2", 1.0)], 0.75),
])
def test_fast_path_equals_folding_the_real_model(setup, target, terms, alpha):
    store = FeatureStore(setup)
    ops = Operators(setup, store)
    keys = [(ops.real(target, s, t)[0], c) for s, t, c in terms]
    model = setup.models[target]
    composed = sum(c * store._operators[(target, k)] for k, c in keys)
    for eval_set in [setup.tasks["t0"].test, setup.tasks["t2"].test, *setup.controls.values()]:
        fast = store.accuracy(target, eval_set, keys, alpha)
        feats = store.features(target, eval_set)
        z_fast = feats.z + alpha * sum(c * store.delta(target, eval_set, k) for k, c in keys)
        record = fold(model.edit_site, composed, alpha)
        try:
            z_real = model.encode_probes(eval_set.inputs).z.double()
            slow = accuracy_end_to_end(model, eval_set)
        finally:
            unfold(record)
        assert float((z_fast - z_real).norm() / z_real.norm()) < 1e-6
        assert abs(fast - slow) <= 1e-6


def test_cell_counts_and_schema(setup, tmp_path):
    results = run_experiments(setup, ["addition", "negation", "generalization", "alpha"], tmp_path / "run", progress=False)
    n_models, n_tasks = len(setup.models), len(setup.tasks)
    pairs = len(list(combinations(setup.tasks, 2)))
    by = lambda exp, method: [c for c in results["cells"] if c["experiment"] == exp and c["method"] == method]  # noqa: E731
    assert len(by("addition", "closed_form")) == n_models * pairs * (n_models - 1) ** 2
    assert len(by("addition", "oracle")) == n_models * pairs
    assert len(by("negation", "closed_form")) == n_models * n_tasks * (n_models - 1)
    ascent = by("negation", "gradient_ascent")
    assert len(ascent) == n_models * n_tasks
    zero = {(c["target"], c["tasks"][0]): c["accuracy"]["A"] for c in by("negation", "zero_shot")}
    assert sum(c["accuracy"]["A"] for c in ascent) < sum(zero.values())  # ascent does lower the task
    assert len(by("alpha", "closed_form")) == n_models * n_tasks * (n_models - 1) * 4
    assert {c["sources"][0] != c["target"] for c in by("addition", "closed_form")} == {True}
    data = json.loads((tmp_path / "run" / "results.json").read_text())
    assert data["schema"] == SCHEMA and data["version"] == VERSION
    cell = by("addition", "closed_form")[0]
    assert set(cell) == {"experiment", "method", "target", "sources", "tasks", "coefficients", "alpha", "accuracy", "residuals"}
    assert set(cell["accuracy"]) == {"A", "B", *setup.controls}
    cos = data["diagnostics"]["cosine"]
    assert set(cos) == set(setup.tasks) and all(-1 <= v["cross_model"] <= 1 for v in cos.values())
    for png in ("retention.png", "alpha_tradeoff.png", "cosine_models.png", "cosine_tasks.png"):
        assert (tmp_path / "run" / png).stat().st_size > 1000


def test_report_re_renders_byte_for_byte(setup, tmp_path):
    run_experiments(setup, ["addition", "negation"], tmp_path / "run", progress=False, plots=False)
    written = (tmp_path / "run" / "tables.md").read_bytes()
    assert render_tables(load_results(tmp_path / "run")).encode() == written


def test_same_seed_same_report(setup, tmp_path):
    a = run_experiments(setup, ["addition"], None, progress=False)
    b = run_experiments(toy_setup(), ["addition"], None, progress=False)
    assert a["cells"] == b["cells"]


def test_random_baseline_is_the_same_descriptor_in_every_cell(setup):
    store = FeatureStore(setup)
    ops = Operators(setup, store)
    key1, _ = ops.random("m0", "m1", "t0")
    key2, _ = ops.random("m0", "m1", "t0")
    assert key1 == key2 and len([k for k in store._operators if k[1][0] == "random"]) == 1
    d = setup.descriptors[("m1", "t0")]
    assert torch.equal(d.random_like(42 + 1000 + 0).matrix, d.random_like(42 + 1000 + 0).matrix)


def test_weight_space_baselines_on_a_same_architecture_pair(tmp_path):
    from platonic.experiments.protocols import WEIGHT_ALPHAS, same_architecture_pairs

    pair_setup = toy_setup(widths=((48, 32), (48, 32), (64, 40)))
    assert same_architecture_pairs(pair_setup) == [("m0", "m1"), ("m1", "m0")]
    results = run_experiments(pair_setup, ["weight_space"], tmp_path / "ws", progress=False, plots=False)
    cells = results["cells"]
    n_pairs = len(list(combinations(pair_setup.tasks, 2)))
    by_method = {m: [c for c in cells if c["method"] == m] for m in ("zero_shot", "task_arithmetic", "weight_transport", "closed_form")}
    assert all(len(v) == 2 * n_pairs for v in by_method.values())
    assert all(c["alpha"] in WEIGHT_ALPHAS for c in by_method["task_arithmetic"] + by_method["weight_transport"])
    assert {(c["sources"][0], c["target"]) for c in by_method["weight_transport"]} == {("m0", "m1"), ("m1", "m0")}
    # every row of the table is on the same targets: m2, with no same-architecture partner, is in none
    assert all({c["target"] for c in v} == {"m0", "m1"} for v in by_method.values())
    assert "Weight-space baselines" in (tmp_path / "ws" / "tables.md").read_text()


def test_weight_space_without_a_same_architecture_pair_is_task_arithmetic_within_every_model():
    results = run_experiments(toy_setup(widths=((48, 32), (64, 40))), ["weight_space"], None, progress=False, plots=False)
    n_pairs = len(list(combinations(toy_setup().tasks, 2)))
    methods = [c["method"] for c in results["cells"]]
    assert methods.count("task_arithmetic") == methods.count("zero_shot") == 2 * n_pairs
    assert "weight_transport" not in methods and "closed_form" not in methods


def test_retention_is_withheld_when_the_oracle_gains_under_a_point():
    from platonic.experiments.tables import retention

    means = {"zero_shot": {"A": 0.30, "B": 0.40}, "closed_form": {"A": 0.35, "B": 0.38}, "oracle": {"A": 0.40, "B": 0.405}}
    ret = retention(means)
    assert ret["A"] == pytest.approx(0.5)
    assert ret["B"] is None  # a 0.5-point oracle gain: the ratio (-400%) would be noise


def test_retention_per_family_pair_is_the_ratio_of_summed_gains_over_slots():
    """Each closed-form slot counts for its own source's family; a run without families gives no table."""
    from platonic.experiments.tables import family_retention

    def cell(method, target, sources, a, b):
        return {"experiment": "addition", "method": method, "target": target, "sources": sources, "tasks": ["t0", "t1"],
                "accuracy": {"A": a, "B": b, "ctrl": 0.5}, "residuals": []}

    cells = [cell("zero_shot", "vit", [], 0.30, 0.40), cell("oracle", "vit", ["vit", "vit"], 0.50, 0.60),
             cell("closed_form", "vit", ["cnn1", "cnn2"], 0.45, 0.50), cell("closed_form", "vit", ["cnn2", "cnn1"], 0.40, 0.55),
             cell("zero_shot", "cnn1", [], 0.20, 0.20), cell("oracle", "cnn1", ["cnn1", "cnn1"], 0.20, 0.205),
             cell("closed_form", "cnn1", ["vit", "cnn2"], 0.30, 0.20)]
    models = {"vit": {"family": "VisionTransformer"}, "cnn1": {"family": "EfficientNet"}, "cnn2": {"family": "EfficientNet"}}
    rows = {(r["source"], r["target"]): r for r in family_retention({"setup": {"models": models}, "cells": cells})}
    to_vit = rows[("EfficientNet", "VisionTransformer")]
    assert to_vit["slots"] == 4 and to_vit["models"] == [("cnn1", "vit"), ("cnn2", "vit")]
    assert to_vit["gain"] == pytest.approx((0.15 + 0.10 + 0.10 + 0.15) / 4)
    assert to_vit["retention"] == pytest.approx(0.50 / 0.80)
    assert rows[("VisionTransformer", "EfficientNet")]["retention"] is None  # the oracle gains nothing on slot A
    assert rows[("EfficientNet", "EfficientNet")]["retention"] is None  # 0.5 point on slot B: under MIN_ORACLE_GAIN
    assert family_retention({"setup": {"models": {"vit": {}}}, "cells": cells}) == []


def test_feature_store_with_an_anchor_pool_solves_anchored(setup):
    """The fast path's anchored solve: the pool through each target's design rows, recorded in the operator."""
    from platonic import RidgeSolver, digest_probes
    from platonic.measurement import design_rows, target_grid

    pool = setup.tasks["t2"].probes
    from platonic import SolveConfig

    store = FeatureStore(setup, solve=SolveConfig(kind="anchored", anchor_weight=0.5), anchor_images=pool)
    desc = setup.descriptors[("m1", "t0")]
    op = store.operator("m0", ("real", "m1", "t0"), desc)
    assert op.solve_record["kind"] == "anchored" and op.solve_record["anchor_digest"] == digest_probes(pool)
    model, spec = setup.models["m0"], setup.tasks["t0"]
    F, G = target_grid(model, spec.probes, spec.prompts, cache=store.cache, progress=False)
    X = RidgeSolver(F, G, anchor=design_rows(model, pool, cache=store.cache, progress=False), anchor_weight=0.5).solve(desc.matrix)
    assert torch.equal(op.delta, (X.T if op.form == "linear" else X).contiguous())
    assert FeatureStore(setup).operator("m0", ("real", "m1", "t0"), desc).solve_record["kind"] == "paper"
    with pytest.raises(InvalidInputError, match="the solve is the paper's"):
        FeatureStore(setup, anchor_images=pool)


def test_anchored_pool_defaults_to_the_other_tasks_probes(setup):
    """Without given images, the pool of task t's operators is the first k probes of every other task."""
    from platonic import digest_probes
    from platonic import SolveConfig

    store = FeatureStore(setup, solve=SolveConfig(kind="anchored", anchor_per_task=5))
    images, digest = store.pool("t0")
    expected = torch.cat([spec.probes[:5] for name, spec in setup.tasks.items() if name != "t0"])
    assert torch.equal(images, expected) and digest == digest_probes(expected)
    op = store.operator("m0", ("real", "m1", "t0"), setup.descriptors[("m1", "t0")])
    assert op.solve_record["kind"] == "anchored" and op.solve_record["anchor_digest"] == digest
    assert store.pool("t1")[1] != digest  # each task's pool leaves out its own probes
    with pytest.raises(InvalidInputError, match="unknown solve 'ridge'"):
        SolveConfig.parse({"kind": "ridge"})
    with pytest.raises(ValueError, match="unknown solve 'ridge'"):  # pydantic's ValidationError, as every config
        SolveConfig(kind="ridge")


def test_each_experiment_is_one_registry_entry_and_names_are_unique():
    from platonic.errors import InvalidInputError
    from platonic.experiments import PROTOCOLS, Protocol, Registry

    assert list(PROTOCOLS) == [
        "addition", "negation", "generalization", "alpha", "weight_space", "orthoreg_sources", "task_arithmetic"]
    assert (PROTOCOLS["addition"].alpha, PROTOCOLS["negation"].alpha, PROTOCOLS["alpha"].alpha) == (0.5, 1.0, None)
    assert all(p.reference.startswith("method.md §") and p.methods[0] == "zero_shot" for p in PROTOCOLS.values())
    assert [n for n, p in PROTOCOLS.items() if p.fast_path] == ["addition", "negation", "generalization", "alpha", "orthoreg_sources"]
    assert PROTOCOLS.methods("negation/adapter") == ("zero_shot", "closed_form", "adapter")
    assert PROTOCOLS.label("single_a") == "single A only" and PROTOCOLS.label("closed_form") == "closed form"
    with pytest.raises(InvalidInputError, match="'addition' is already registered"):
        Registry([PROTOCOLS["addition"], Protocol("addition", lambda *a, **k: [], "-", "-", ("zero_shot",))])


def test_run_takes_alpha_and_solve_settings_from_the_entries_unless_given(setup):
    from platonic.errors import InvalidInputError
    from platonic import SolveConfig

    default = run_experiments(setup, ["negation"], None, progress=False)
    paper = {"kind": "paper", "rank": None, "truncation": "paper", "anchor_weight": 1.0, "anchor_per_task": 64,
             "anchor_images": None}
    assert default["settings"]["protocols"]["negation"] == {"alpha": 1.0, "mu_a": 1e-2, "mu_b": 1e-6, **paper, "sources": "single"}
    assert {c["alpha"] for c in default["cells"] if c["method"] == "closed_form"} == {1.0}
    environment = default["settings"]["environment"]  # what the run ran on, so two machines' results can be told apart
    assert torch.__version__.startswith(environment["versions"]["torch"])
    assert environment["cpu"]["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    given = run_experiments(setup, ["negation"], None, progress=False, alpha=0.5, solve=SolveConfig(mu_a=0.1))
    assert given["settings"]["protocols"]["negation"] == {"alpha": 0.5, "mu_a": 0.1, "mu_b": 1e-6, **paper, "sources": "single"}
    assert {c["alpha"] for c in given["cells"] if c["method"] == "closed_form"} == {0.5}
    assert [c["residuals"] for c in given["cells"]] != [c["residuals"] for c in default["cells"]]
    with pytest.raises(InvalidInputError, match="alpha does not apply to alpha"):
        run_experiments(setup, ["alpha"], None, progress=False, alpha=0.5)


def test_a_second_gradient_ascent_baseline_reads_its_embeddings_from_the_cache(setup, monkeypatch):
    from platonic.experiments.protocols import negation_gradient_ascent
    from platonic.models.base import DualEncoder

    first = negation_gradient_ascent(setup, FeatureStore(setup), progress=False)

    def no_encoding(*args, **kwargs):
        raise AssertionError("the edited models were encoded again")

    monkeypatch.setattr(DualEncoder, "encode_probes", no_encoding)
    second = negation_gradient_ascent(setup, FeatureStore(setup), progress=False)
    assert [c["accuracy"] for c in first] == [c["accuracy"] for c in second] and len(first) == 12


def test_negation_runs_the_baselines_it_is_given_at_their_budget(setup):
    """Issue 34: `--baselines` / `--ascent-steps` (registry options of negation): a run on one's own models need
    not wait for the gradient-ascent baseline; the default runs every baseline, as before."""
    from platonic.experiments.registry import PROTOCOLS

    assert PROTOCOLS["negation"].baselines == ("target_as_source", "gradient_ascent")
    calls = []
    ascend = setup.baselines["gradient_ascent"]
    setup.baselines["gradient_ascent"] = lambda target, task, steps=None: calls.append(steps) or ascend(target, task, steps)
    try:
        none = run_experiments(setup, ["negation"], None, progress=False, options={"negation": {"baselines": ()}})
        short = run_experiments(setup, ["negation"], None, progress=False,
                                options={"negation": {"baselines": ("gradient_ascent",), "ascent_steps": 2}})
    finally:
        setup.baselines["gradient_ascent"] = ascend
    assert {c["method"] for c in none["cells"]} == {"zero_shot", "closed_form"} and calls[:0] == []
    assert {c["method"] for c in short["cells"]} == {"zero_shot", "closed_form", "gradient_ascent"}
    assert set(calls) == {2} and short["settings"]["protocols"]["negation"]["ascent_steps"] == 2


def test_weight_space_gradfix_and_theseus_rows_are_on_the_transport_cells(tmp_path):
    pair_setup = toy_setup(widths=((48, 32), (48, 32), (64, 40)))
    results = run_experiments(pair_setup, ["weight_space"], tmp_path / "ws", progress=False, plots=False,
                              options={"weight_space": {"val_size": 20}})
    key = lambda c: (c["target"], tuple(c["sources"]), tuple(c["tasks"]))  # noqa: E731
    cells = {m: sorted(key(c) for c in results["cells"] if c["method"] == m)
             for m in ("weight_transport", "gradfix", "theseus", "closed_form")}
    assert cells["gradfix"] == cells["weight_transport"] == cells["theseus"] == cells["closed_form"] and cells["gradfix"]
    diag = results["diagnostics"]["weight_space"]
    assert diag["gradfix"]["per_class"] == 10 and diag["gradfix"]["ran"]
    assert all(0 < v < 1 for v in diag["gradfix_kept"].values())  # the mask keeps some entries, not all
    assert all(v == 0 for v in diag["theseus_zeroed_share"].values())  # every toy parameter has a map
    tables = (tmp_path / "ws" / "tables.md").read_text()
    assert "| GradFix: transport masked" in tables and "| Theseus: transport through" in tables
    without = run_experiments(replace(pair_setup, baselines={k: v for k, v in pair_setup.baselines.items() if k != "labelled"}),
                              ["weight_space"], None, progress=False, plots=False, options={"weight_space": {"val_size": 20}})
    assert "gradfix" not in {c["method"] for c in without["cells"]} and "theseus" in {c["method"] for c in without["cells"]}


def test_consensus_sources_beside_single_sources(setup, tmp_path):
    from platonic import mean
    from platonic.experiments.protocols.paper import consensus_descriptor

    results = run_experiments(setup, ["addition", "negation"], tmp_path / "run", progress=False, plots=False,
                              options={"addition": {"sources": "both"}, "negation": {"sources": "both"}})
    by = lambda exp, m: [c for c in results["cells"] if c["experiment"] == exp and c["method"] == m]  # noqa: E731
    n, pairs = len(setup.models), len(list(combinations(setup.tasks, 2)))
    assert len(by("addition", "consensus")) == n * pairs and len(by("addition", "closed_form")) == n * pairs * (n - 1) ** 2
    assert len(by("negation", "consensus")) == n * len(setup.tasks)
    assert all(c["sources"] == ["consensus", "consensus"] for c in by("addition", "consensus"))
    d = consensus_descriptor(setup, "m0", "t1")
    others = [setup.descriptors[(m, "t1")] for m in ("m1", "m2")]
    assert torch.allclose(d.matrix, mean(others).matrix) and torch.allclose(d.matrix, (others[0].matrix + others[1].matrix) / 2)
    # the consensus cell is the closed form of the mean descriptor, through the same fast path
    store = FeatureStore(setup)
    ops = Operators(setup, store)
    key, _ = ops.real("m0", "consensus", "t1")
    cell = next(c for c in by("negation", "consensus") if c["target"] == "m0" and c["tasks"] == ["t1"])
    assert cell["accuracy"]["A"] == store.accuracy("m0", setup.tasks["t1"].test, [(key, -1.0)], 1.0)
    cos = results["diagnostics"]["consensus_cosine"]
    assert set(cos) == set(setup.tasks) and all(-1 <= v["consensus"] <= 1 and -1 <= v["single"] <= 1 for v in cos.values())
    tables = (tmp_path / "run" / "tables.md").read_text()
    assert "| closed form, consensus of sources" in tables and "consensus " in tables and "single source" in tables
    only = run_experiments(setup, ["addition"], None, progress=False, plots=False, options={"addition": {"sources": "consensus"}})
    assert "closed_form" not in {c["method"] for c in only["cells"]}
    with pytest.raises(InvalidInputError, match="sources is one of"):
        run_experiments(setup, ["negation"], None, progress=False, plots=False, options={"negation": {"sources": "all"}})
