"""Fine-tuning against the frozen prompt head, gradient ascent, OrthoReg, task vectors."""

import pytest
import torch

from platonic import InvalidInputError
from platonic.experiments.engine import accuracy_end_to_end
from platonic.experiments.setups import toy_setup
from platonic.finetuning import FinetuneConfig, finetune, orthoreg_penalty
from platonic.task_vector import TaskVector


@pytest.fixture(scope="module")
def setup():
    return toy_setup()


def train_split(setup, task="t0"):
    spec = setup.tasks[task]
    g = torch.Generator().manual_seed(5)
    x = spec.test.inputs + 0.1 * torch.randn(spec.test.inputs.shape, generator=g)  # a labelled "train" draw
    return x, spec.test.labels, spec.prompts


def test_orthoreg_penalty_matches_its_formula():
    dW_wide = torch.tensor([[1.0, 2.0, 0.0], [0.0, 1.0, 1.0]])  # rows < cols: Gram = dW dW^T (2 x 2)
    dW_tall = dW_wide.T.contiguous()  # rows > cols: Gram = dW^T dW (2 x 2), the same matrix
    gram = dW_wide @ dW_wide.T
    expected = float(torch.linalg.matrix_norm(gram - torch.eye(2)))  # ||.||_F, not squared
    assert float(orthoreg_penalty([dW_wide])) == pytest.approx(expected)
    assert float(orthoreg_penalty([dW_tall, torch.ones(5)])) == pytest.approx(expected)  # 1-D skipped
    Q, _ = torch.linalg.qr(torch.randn(6, 3))
    assert float(orthoreg_penalty([Q])) == pytest.approx(0.0, abs=1e-5)  # orthonormal columns cost nothing
    with pytest.raises(InvalidInputError, match="no 2-D parameter"):
        orthoreg_penalty([torch.ones(3)])


def test_full_finetune_raises_accuracy_and_ascent_lowers_it(setup):
    model = setup.models["m0"]
    x, y, prompts = train_split(setup)
    before = accuracy_end_to_end(model, setup.tasks["t0"].test)
    cfg = FinetuneConfig(steps=60, lr=3e-3, batch_size=32, weight_decay=0.0, logit_scale=20.0)
    ft, losses = finetune(model, x, y, prompts, cfg, progress=False)
    after = accuracy_end_to_end(ft, setup.tasks["t0"].test)
    assert after > before + 0.03, (before, after)
    assert losses[-1] < losses[0]
    assert torch.equal(model.tower[0].weight, setup.models["m0"].tower[0].weight)  # the original is untouched
    down, _ = finetune(model, x, y, prompts, cfg.model_copy(update={"ascent": True}), progress=False)
    assert accuracy_end_to_end(down, setup.tasks["t0"].test) < before - 0.1


def test_finetune_is_deterministic(setup):
    model = setup.models["m1"]
    x, y, prompts = train_split(setup)
    cfg = FinetuneConfig(steps=10, lr=1e-3, batch_size=16, orthoreg=1.0)
    a, la = finetune(model, x, y, prompts, cfg, progress=False)
    b, lb = finetune(model, x, y, prompts, cfg, progress=False)
    assert la == lb
    assert all(torch.equal(p, q) for p, q in zip(a.module.parameters(), b.module.parameters()))


def test_task_vector_algebra_and_apply(setup):
    model = setup.models["m0"]
    x, y, prompts = train_split(setup)
    ft, _ = finetune(model, x, y, prompts, FinetuneConfig(steps=5, lr=1e-2), progress=False)
    tau = TaskVector.from_models(model.module, ft.module)
    assert tau.norm() > 0
    assert (tau - tau).norm() == 0 and (-(-tau)).cosine(tau) == pytest.approx(1.0)
    assert (0.5 * tau + tau * 0.5).norm() == pytest.approx(tau.norm())
    assert sum([tau, tau]).norm() == pytest.approx(2 * tau.norm())
    rebuilt = tau.apply_to(model.module, 1.0)
    for (k, p), q in zip(rebuilt.state_dict().items(), ft.module.state_dict().values()):
        assert torch.allclose(p, q, atol=1e-6), k
    with pytest.raises(InvalidInputError, match="another architecture|different architectures"):
        TaskVector({"nope": torch.zeros(1)}).apply_to(model.module)


def test_config_is_validated():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="steps"):
        FinetuneConfig(steps=0)
    with pytest.raises(ValidationError, match="mode"):
        FinetuneConfig(mode="everything")


def test_replay_term_keeps_other_inputs_where_they_were(setup):
    """rho * mean ||normalise(z(r)) - normalise(z_pre(r))||^2 holds the replay inputs' embeddings in place."""
    model = setup.models["m0"]
    x, y, prompts = train_split(setup)
    others = setup.tasks["t2"].test.inputs
    before = torch.nn.functional.normalize(model.encode_probes(others).z, dim=1)

    def drift(config, **kwargs):
        ft, _ = finetune(model, x, y, prompts, config, progress=False, **kwargs)
        return float((torch.nn.functional.normalize(ft.encode_probes(others).z, dim=1) - before).pow(2).sum(1).mean())

    cfg = FinetuneConfig(steps=30, lr=3e-2, batch_size=40, weight_decay=0.0, logit_scale=20.0)
    free = drift(cfg)
    held = drift(cfg.model_copy(update={"replay": 30.0, "replay_batch_size": 64}), replay_inputs=others)
    assert free > 0 and held < 0.5 * free
    with pytest.raises(InvalidInputError, match="needs replay_inputs"):
        finetune(model, x, y, prompts, cfg.model_copy(update={"replay": 1.0}), progress=False)
    with pytest.raises(InvalidInputError, match="config.replay is 0"):
        finetune(model, x, y, prompts, cfg, progress=False, replay_inputs=others)


def test_warmup_fraction_and_the_models_own_logit_scale(setup):
    from pydantic import ValidationError

    assert FinetuneConfig(steps=128, warmup_fraction=0.1).warmup() == 12
    assert FinetuneConfig(steps=4, warmup_fraction=0.1).warmup() == 1  # at least one step
    assert FinetuneConfig(steps=50, warmup_steps=7).warmup() == 7
    with pytest.raises(ValidationError, match="warmup_steps or warmup_fraction"):
        FinetuneConfig(warmup_steps=5, warmup_fraction=0.1)
    x, y, prompts = train_split(setup)
    with pytest.raises(InvalidInputError, match="no learned logit scale"):  # the toy models have none
        finetune(setup.models["m0"], x, y, prompts, FinetuneConfig(steps=1, logit_scale=None), progress=False)


def test_full_finetune_never_trains_an_appended_identity_site(setup):
    from platonic.edit import AppendedLinearSite

    model = setup.models["m0"].copy_for_new_weights()
    d = model.embed_dim
    site = AppendedLinearSite.install(model.tower, "2", d)  # after the tower's last linear: identity d x d
    model._site = site  # the model's edit site is the appended one (as the world's mixer)
    x, y, prompts = train_split(setup)
    ft, _ = finetune(model, x, y, prompts, FinetuneConfig(steps=5, lr=1e-2), progress=False)
    appended = ft.tower[2]
    assert torch.equal(appended.linear.weight, torch.eye(d, dtype=appended.linear.weight.dtype))
    assert not torch.equal(ft.tower[0].weight, model.tower[0].weight)  # the rest did train
    site.remove()


def test_the_schedule_is_cosine_or_constant_after_the_warm_up():
    import math

    cosine = FinetuneConfig(steps=10, warmup_steps=2)
    assert [cosine.lr_factor(s, 10) for s in (0, 1)] == [0.5, 1.0]  # linear warm-up (step + 1) / w
    assert cosine.lr_factor(2, 10) == 1.0 and cosine.lr_factor(9, 10) == pytest.approx(0.5 * (1 + math.cos(math.pi * 7 / 8)))
    constant = cosine.model_copy(update={"schedule": "constant"})
    assert [constant.lr_factor(s, 10) for s in range(10)] == [0.5] + [1.0] * 9  # the paper's sources (method.md §1.6)
    with pytest.raises(Exception, match="schedule"):
        FinetuneConfig(schedule="linear")


def test_epochs_set_the_length_from_the_train_split(setup):
    from pydantic import ValidationError

    cfg = FinetuneConfig(epochs=3, batch_size=32, lr=1e-3, schedule="constant")
    assert cfg.total_steps(100) == 10 and cfg.total_steps(96) == 9 and cfg.total_steps(5) == 1  # ceil(3 n / 32)
    assert FinetuneConfig(steps=7).total_steps(10_000) == 7
    assert FinetuneConfig(epochs=1, warmup_fraction=0.5).warmup(cfg.total_steps(100)) == 5  # of the run's own length
    with pytest.raises(ValidationError, match="steps or epochs"):
        FinetuneConfig(steps=5, epochs=1)
    x, y, prompts = train_split(setup)
    _, losses = finetune(setup.models["m0"], x, y, prompts, cfg, progress=False)
    assert len(losses) == -(-3 * len(x) // 32)  # ceil


def test_orthoreg_on_lora_sees_the_update_the_forward_pass_applies():
    """peft 0.21 applies the out_proj LoRA of a packed nn.MultiheadAttention twice (forward and merge):
    the deltas OrthoReg penalises are the merged weights minus the pre-trained ones, layer by layer."""
    from platonic.finetuning.lora import attach_lora, lora_weight_deltas

    class Tower(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(8, 2)
            self.fc = torch.nn.Linear(8, 8)

    torch.manual_seed(0)
    tower = Tower()
    before = {k: v.clone() for k, v in tower.state_dict().items()}
    wrapped = attach_lora(tower, ["attn", "fc"], rank=2, alpha=4.0, spec="test tower", seed=0)
    with torch.no_grad():
        for name, p in wrapped.named_parameters():
            if "lora_B" in name:
                p.normal_()
    deltas = lora_weight_deltas(wrapped)
    merged = wrapped.merge_and_unload().state_dict()
    realised = [merged[k] - before[k] for k in ("attn.in_proj_weight", "attn.out_proj.weight", "fc.weight")]
    assert len(deltas) == 3
    for r in realised:  # every realised update is one of the penalised deltas
        assert any(d.shape == r.shape and torch.allclose(d, r, atol=1e-5) for d in deltas)


def test_finetune_chooses_which_parameters_train_and_their_learning_rates(setup):
    """parameters= picks the trained weights (no monkeypatching of the loop), lr_scale= their lr factors."""
    from platonic.finetuning import trainable_parameters

    model = setup.models["m0"]
    x, y, prompts = train_split(setup)
    cfg = FinetuneConfig(steps=8, lr=3e-3, batch_size=32, weight_decay=0.1, logit_scale=20.0)
    plain, _ = finetune(model, x, y, prompts, cfg, progress=False)
    ones, _ = finetune(model, x, y, prompts, cfg, progress=False, lr_scale=lambda name: 1.0)
    assert all(torch.equal(a, b) for a, b in zip(plain.tower.parameters(), ones.tower.parameters()))  # one group: the same run

    def last_layer(ft):
        return [(k, p) for k, p in trainable_parameters(ft, "full") if k.startswith("2.")]

    head, _ = finetune(model, x, y, prompts, cfg, progress=False, parameters=last_layer)
    for (name, before), after in zip(model.tower.named_parameters(), head.tower.parameters()):
        assert torch.equal(before, after) != name.startswith("2."), name  # only the last Linear moved

    frozen_first, _ = finetune(model, x, y, prompts, cfg.model_copy(update={"weight_decay": 0.0}), progress=False,
                               lr_scale=lambda name: 0.0 if name.startswith("0.") else 2.0)
    assert torch.equal(frozen_first.tower[0].weight, model.tower[0].weight)
    assert not torch.equal(frozen_first.tower[2].weight, model.tower[2].weight)
    with pytest.raises(InvalidInputError, match="full or attention"):
        finetune(model, x, y, prompts, cfg.model_copy(update={"mode": "lora"}), progress=False, parameters=last_layer)
    with pytest.raises(InvalidInputError, match="no parameter"):
        finetune(model, x, y, prompts, cfg, progress=False, parameters=lambda ft: [])
    with pytest.raises(InvalidInputError, match="finite factor"):
        finetune(model, x, y, prompts, cfg, progress=False, lr_scale=lambda name: float("nan"))
