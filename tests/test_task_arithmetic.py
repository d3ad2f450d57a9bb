"""The task-arithmetic experiment (method.md §2): choices on validation only, the fine-tune cache, tables."""

import pytest
import torch

from platonic import InvalidInputError
from platonic.experiments.report import render_tables
from platonic.experiments.engine.setup import EvalSet
from platonic.experiments.setups.labelled import LabelledTask, TaskArithmeticSetup, split_control
from platonic.experiments import run_experiments
from platonic.experiments.engine import TaskVectorRecipe
from platonic.experiments.protocols import ALPHAS, run_task_arithmetic
from platonic.experiments.setups.toy import toy_setup

RECIPE = TaskVectorRecipe(steps=12, batch_size=32, lr=1e-2, logit_scale=20.0)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def toy():
    return toy_setup()


def _setup(toy, shuffle_test: bool) -> TaskArithmeticSetup:
    """The toy models and tasks with labelled train splits; test labels (tasks and controls) optionally shuffled."""
    def scrambled(s: EvalSet, seed: int) -> EvalSet:
        if not shuffle_test:
            return s
        return EvalSet(s.name, s.inputs, s.labels[torch.randperm(len(s.labels), generator=torch.Generator().manual_seed(seed))],
                       s.prompts)

    tasks = {}
    for i, (name, spec) in enumerate(list(toy.tasks.items())[:3]):
        x, y = spec.test.inputs, spec.test.labels
        train = EvalSet(f"{name}/train", x + 0.1 * torch.randn(x.shape, generator=torch.Generator().manual_seed(10 + i)), y, spec.prompts)
        tasks[name] = LabelledTask(name, spec.prompts, train, spec.val, scrambled(spec.test, 100 + i))
    controls = {}
    for j, (name, s) in enumerate(toy.controls.items()):
        c = split_control(name, s)
        controls[name] = type(c)(name, c.val, scrambled(c.test, 200 + j))
    return TaskArithmeticSetup("toy", {"m0": toy.models["m0"]}, tasks, controls)


def _choices(out: dict) -> dict:
    return {(c["experiment"], c["method"], c.get("orthoreg"), tuple(c["tasks"])): (c["alpha"], c["lambda"]) for c in out["cells"]}


def test_alpha_and_lambda_never_see_test_labels_and_fine_tunes_are_cached(toy):
    logs = []
    clean = run_task_arithmetic(_setup(toy, False), flavours=["full", "linear"], lambdas=[0.1, 10.0], recipe=RECIPE, log=logs.append)
    shuffled = run_task_arithmetic(_setup(toy, True), flavours=["full", "linear"], lambdas=[0.1, 10.0], recipe=RECIPE, log=logs.append)
    assert _choices(clean) == _choices(shuffled)  # every alpha (addition, negation) and lambda, unchanged
    assert clean["settings"]["chosen_lambda"] == shuffled["settings"]["chosen_lambda"]
    acc = lambda out: [c["accuracy"] for c in out["cells"]]  # noqa: E731
    assert acc(clean) != acc(shuffled)  # the test labels did change what is reported
    assert all(c["alpha"] in ALPHAS for c in clean["cells"])
    assert any(c["alpha"] > 0 for c in clean["cells"])  # the choices are not trivially "no edit"
    # the second run fine-tuned nothing: every task vector came from the cache
    misses = [m for m in logs if "task vectors" in m]
    assert all("(0 from the cache)" in m for m in misses[: len(misses) // 2])
    assert all("(3 from the cache)" in m for m in misses[len(misses) // 2 :])
    adds = [c for c in clean["cells"] if c["experiment"] == "task_arithmetic/addition" and c["method"] != "zero_shot"]
    assert {(c["method"], c["orthoreg"]) for c in adds} == {("full", False), ("full", True), ("linear", False), ("linear", True)}
    assert all(c["lambda"] == 0 for c in adds if not c["orthoreg"]) and all(c["lambda"] in (0.1, 10.0) for c in adds if c["orthoreg"])


def test_tables_heatmaps_and_run_directory(toy, tmp_path):
    out = run_experiments(_setup(toy, False), ["task_arithmetic"], tmp_path / "run",
                          options={"task_arithmetic": {"flavours": ["full"], "lambdas": [1.0], "recipe": RECIPE}})
    tables = (tmp_path / "run" / "tables.md").read_text()
    assert "| full FT | " in tables and "| full FT + OrthoReg | " in tables and "Task arithmetic, m0" in tables
    assert tables == render_tables(out)
    assert (tmp_path / "run" / "cosine_ta_m0_full_plain.png").is_file()
    assert (tmp_path / "run" / "cosine_ta_m0_full_orthoreg.png").is_file()
    m = out["diagnostics"]["cosine_matrices"]["ta_m0_full_plain"]["matrix"]
    assert all(abs(m[i][i] - 1) < 1e-6 for i in range(len(m)))


def test_bad_flavours_lambdas_and_models_without_attention(toy):
    setup = _setup(toy, False)
    with pytest.raises(InvalidInputError, match="no transformer attention layers.*leave this model out"):
        run_task_arithmetic(setup, flavours=["attention"], recipe=RECIPE)
    with pytest.raises(InvalidInputError, match="unknown flavour"):
        run_task_arithmetic(setup, flavours=["fancy"], recipe=RECIPE)
    with pytest.raises(InvalidInputError, match=r"within \[0.1, 100\]"):
        run_task_arithmetic(setup, flavours=["full"], lambdas=[0.0], recipe=RECIPE)
    with pytest.raises(InvalidInputError, match="not among the flavours"):
        run_task_arithmetic(setup, flavours=["full"], negation_flavours=["linear"], recipe=RECIPE)
    with pytest.raises(InvalidInputError, match="at least two tasks"):
        setup.select(tasks=["t0"])


def test_every_merge_rule_with_and_without_orthoreg_on_the_same_fine_tunes(toy, tmp_path):
    from platonic.merging import MERGE_RULES

    logs = []
    out = run_experiments(_setup(toy, False), ["task_arithmetic"], tmp_path / "run", plots=False, log=logs.append,
                          options={"task_arithmetic": {"flavours": ["full"], "lambdas": [1.0], "recipe": RECIPE,
                                                       "merges": list(MERGE_RULES), "negation_flavours": []}})
    adds = [c for c in out["cells"] if c["experiment"] == "task_arithmetic/addition" and c["method"] != "zero_shot"]
    assert {(c["merge"], c["orthoreg"]) for c in adds} == {(m, o) for m in MERGE_RULES for o in (False, True)}
    assert all(c["alpha"] in ALPHAS for c in adds)
    # one set of fine-tunes serves every rule: 3 tasks x (plain, lambda 1) trained once, nothing from the cache after
    assert sum("task vectors" in line for line in logs) == 2
    by = {(c["merge"], c["orthoreg"]): c for c in adds}
    assert all(by[(m, o)]["finetuned"] == by[("sum", o)]["finetuned"] for m in MERGE_RULES for o in (False, True))
    per_merge = out["settings"]["task_arithmetic"]["chosen_lambda_per_merge"]["m0"]["full"]
    assert set(per_merge) == set(MERGE_RULES)
    tables = (tmp_path / "run" / "tables.md").read_text()
    for row in ("| full FT | ", "| full FT + OrthoReg | ", "| full FT, TIES | ", "| full FT, TIES + OrthoReg | ",
                "| full FT, DARE + OrthoReg | ", "| full FT, ISO-C | ", "| full FT, TSV-M + OrthoReg | "):
        assert row in tables
    assert tables == render_tables(out)
    with pytest.raises(InvalidInputError, match="unknown merge rule"):
        run_task_arithmetic(_setup(toy, False), flavours=["full"], recipe=RECIPE, merges=["sum", "magic"])
    with pytest.raises(InvalidInputError, match="more than once"):
        run_task_arithmetic(_setup(toy, False), flavours=["full"], recipe=RECIPE, merges=["ties", "ties"])


def test_negation_encodes_the_task_only_where_the_controls_keep_and_chooses_as_encoding_everything():
    """The negation's alpha: the lowest task accuracy among the alphas whose controls all keep 95 % of zero-shot.
    Controls are encoded in order until one fails; the task's split only where all keep (fakes record each encode)."""
    from types import SimpleNamespace

    from platonic.experiments.protocols.task_arithmetic import CONTROL_KEEP, negation_alpha

    zero = {"c1": 0.8, "c2": 0.6}
    # accuracy of a split under theta_0 - a tau: the task falls with a; c1 keeps up to a = 0.3, c2 up to 0.2 and
    # again at 0.9 (not monotone), so the task's split is encoded at a <= 0.2 and at 0.9 only
    def accuracy(name: str, a: float) -> float:
        if name == "t/val":
            return 0.9 - a if a != 0.9 else 0.05
        keeps = {"c1/val": a <= 0.3 or a == 0.9, "c2/val": a <= 0.2 or a == 0.9}[name]
        base = zero[name.split("/")[0]]
        return base if keeps else base * (CONTROL_KEEP - 0.01)

    calls = []

    class FakeVariants:
        def features(self, tau, alpha, sets):
            calls.append((round(-alpha, 2), [s.name for s in sets]))
            return {s.name: (s.name, round(-alpha, 2)) for s in sets}

    feats = SimpleNamespace(accuracy=lambda z, s: accuracy(*z))
    split = lambda name: SimpleNamespace(name=name)  # noqa: E731
    best = negation_alpha(feats, FakeVariants(), object(), split("t/val"), {"c1": split("c1/val"), "c2": split("c2/val")},
                          zero)
    kept = [a for a in ALPHAS if accuracy("c1/val", a) >= CONTROL_KEEP * 0.8 and accuracy("c2/val", a) >= CONTROL_KEEP * 0.6]
    assert best == min(kept, key=lambda a: (accuracy("t/val", a), a)) == 0.9
    assert sorted(a for a, names in calls if names == ["t/val"]) == kept
    for a in ALPHAS:  # c2 is encoded only where c1 kept
        names = [n for b, ns in calls if b == a for n in ns]
        assert ("c2/val" in names) == (accuracy("c1/val", a) >= CONTROL_KEEP * 0.8)
