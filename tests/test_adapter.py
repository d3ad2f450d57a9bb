"""The adapter route's terms, settings and errors, on the synthetic toy setup (seconds)."""

import pytest
import torch

from platonic import AdaptConfig, Composition, InvalidInputError, adapt
from platonic.adapter import adapt_config_from, as_terms, select_terms
from platonic.experiments.setups.toy import toy_setup


@pytest.fixture(scope="module")
def setup():
    return toy_setup()


def probes_of(setup, *tasks):
    return {setup.descriptors[("m0", t)].grid.probe_digest: setup.tasks[t].probes for t in tasks}


TOY_TARGETS = ("0", "2")  # the toy tower is Sequential(Linear, Tanh, Linear): name its Linears


def test_tower_without_lora_layers_is_refused_with_the_fix(setup):
    desc = setup.descriptors[("m0", "t0")]
    with pytest.raises(InvalidInputError, match="no layers LoRA can wrap.*closed form"):
        adapt(setup.models["m1"], desc, probes=probes_of(setup, "t0"), progress=False)


def test_two_term_composition_is_fitted_jointly(setup):
    """One adapter for both terms (on different grids); both terms' residuals fall."""
    a, b = setup.descriptors[("m0", "t0")], setup.descriptors[("m0", "t1")]
    config = AdaptConfig(target_modules=TOY_TARGETS, lr=1e-2, max_steps=200)
    adapter = adapt(setup.models["m1"], a + b, config=config, probes=probes_of(setup, "t0", "t1"), progress=False)
    assert isinstance(a + b, Composition) and len(adapter.terms) == 2
    residuals = adapter.report["relative_residual"]
    assert set(residuals) == {"t0@" + a.provenance.source, "t1@" + b.provenance.source}
    assert all(r < 0.9 for r in residuals.values()), residuals
    alone = adapt(setup.models["m1"], a, config=config, probes=probes_of(setup, "t0"), progress=False)
    assert adapter.report["probes"] == {"t0@" + a.provenance.source: 150, "t1@" + b.provenance.source: 150}
    assert (alone.report["steps"], adapter.report["steps"]) == (60, 100)  # 20 epochs of batch 64 over the pooled probes


def test_held_out_probes_choose_the_step(setup):
    desc = setup.descriptors[("m0", "t2")]
    config = AdaptConfig(target_modules=TOY_TARGETS, lr=1e-2, max_steps=40, holdout=0.25, eval_every=10)
    adapter = adapt(setup.models["m2"], desc, config=config, probes=probes_of(setup, "t2"), progress=False)
    steps = [e["step"] for e in adapter.report["held_out"]]
    assert steps == [10, 20, 30, 40]
    best = min(adapter.report["held_out"], key=lambda e: e["held_out_residual"])
    assert adapter.report["chosen_step"] == best["step"]


def test_terms_are_checked(setup):
    a, b = setup.descriptors[("m0", "t0")], setup.descriptors[("m1", "t0")]
    with pytest.raises(InvalidInputError, match="appears twice"):
        as_terms([(1.0, a), (-1.0, a)])
    with pytest.raises(InvalidInputError, match="finite"):
        as_terms([(float("nan"), a)])
    with pytest.raises(InvalidInputError, match="has no descriptor among.*add its .utd file"):
        select_terms([a], {"t3": 1.0})
    with pytest.raises(InvalidInputError, match="matches 2 descriptors.*TASK@SOURCE"):
        select_terms([a, b], {"t0": 1.0})
    assert select_terms([a, b], {f"t0@{b.provenance.source}": -1.0}) == [(-1.0, b)]


def test_settings_errors_name_the_field():
    with pytest.raises(InvalidInputError, match="adapter setting rank"):
        adapt_config_from({"rank": 0})
    with pytest.raises(InvalidInputError, match="adapter setting holdout"):
        adapt_config_from({"holdout": 1.5})
    assert AdaptConfig().steps_for(1080) == 340 and AdaptConfig().steps_for(100_000) == 540


def test_anchors_keep_unlabeled_inputs_where_they_were(setup):
    """Beyond the paper: anchor_weight keeps the embeddings of unlabeled anchors; without it they drift more."""
    desc = setup.descriptors[("m0", "t0")]
    anchors = setup.tasks["t3"].probes
    model = setup.models["m1"]

    def drift(adapter):
        edited = adapter.merge_into(model.copy_for_new_weights())
        unit = lambda z: torch.nn.functional.normalize(z, dim=1)  # noqa: E731
        return float((unit(edited.encode_probes(anchors).z) - unit(model.encode_probes(anchors).z)).norm())

    base = AdaptConfig(target_modules=TOY_TARGETS, lr=1e-2, max_steps=60)
    free = adapt(model, desc, config=base, probes=probes_of(setup, "t0"), progress=False)
    kept = adapt(model, desc, config=base.model_copy(update={"anchor_weight": 10.0}), anchors=anchors,
                 probes=probes_of(setup, "t0"), progress=False)
    assert kept.report["anchors"]["count"] == len(anchors)
    assert drift(kept) < 0.5 * drift(free), (drift(kept), drift(free))
    with pytest.raises(InvalidInputError, match="anchors and anchor_weight go together"):
        adapt(model, desc, config=base, anchors=anchors, probes=probes_of(setup, "t0"), progress=False)


def test_the_adapter_cache_key_names_the_modules_lora_wraps(setup, monkeypatch):
    """A fit on other target modules is another fit: the key changes with them, whether the config names them or
    the model's rule (`lora_target_modules`) gives them, and the rule can change while the weights do not."""
    from platonic.experiments.engine.adapter_cache import adapter_key

    model, desc = setup.models["m1"], setup.descriptors[("m0", "t0")]
    pairs = [(1.0, desc)]
    named = adapter_key(model, pairs, AdaptConfig(target_modules=TOY_TARGETS))
    assert named == adapter_key(model, pairs, AdaptConfig(target_modules=TOY_TARGETS))
    assert named != adapter_key(model, pairs, AdaptConfig(target_modules=("0",)))
    monkeypatch.setattr(type(model), "lora_target_modules", property(lambda self: ["0"]))
    by_rule = adapter_key(model, pairs, AdaptConfig())
    monkeypatch.setattr(type(model), "lora_target_modules", property(lambda self: ["0", "2"]))
    assert adapter_key(model, pairs, AdaptConfig()) != by_rule
