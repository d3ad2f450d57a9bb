"""The linear flavour (tangent fine-tuning) and task vectors in the checkpoint dtype."""

import pytest
import torch

from platonic import InvalidInputError
from platonic.experiments.setups.toy import toy_setup
from platonic.finetuning.training import FinetuneConfig, finetune
from platonic.finetuning.linearize import LinearizedEncoder, linearisable_names
from platonic.task_vector import TaskVector


@pytest.fixture(scope="module")
def setup():
    return toy_setup()


def _reference_jvp(encoder, names, delta, inputs):
    """f(theta_0) and J dtheta by reverse-over-reverse (torch.autograd.functional.jvp), independent of torch.func."""
    params = dict(encoder.module.named_parameters())
    originals = {n: params[n].detach().clone() for n in names}

    def f(*weights):
        from torch.func import functional_call
        from platonic.finetuning.linearize import TowerCall

        return functional_call(TowerCall(encoder), {f"root.{n}": w for n, w in zip(names, weights)}, (inputs,))

    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):  # the fused CPU kernel has no double backward
        out, change = torch.autograd.functional.jvp(f, tuple(originals.values()), tuple(delta[n] for n in names))
    return out, change


def _random_delta(encoder, scale=0.05, seed=0):
    g = torch.Generator().manual_seed(seed)
    params = dict(encoder.module.named_parameters())
    return {n: scale * torch.randn(params[n].shape, generator=g, dtype=params[n].dtype) for n in linearisable_names(encoder)}


def test_linearised_output_is_pretrained_output_plus_jvp_on_toy_and_world_vit(setup):
    from platonic.world.image.zoo import SPECS, WorldModel, build_module

    toy = setup.models["m0"]
    vit = WorldModel(SPECS["vit-a"], build_module(SPECS["vit-a"], 0))
    for model, raw in ((toy, setup.tasks["t0"].test.inputs[:16]),
                       (vit, torch.randint(0, 256, (6, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(1)))):
        delta = _random_delta(model)
        inputs = model.prepare_probes(raw)
        lin = LinearizedEncoder(model, delta)
        with torch.no_grad():
            z_pre = model._forward_tower(inputs)
            z_lin = lin._forward_tower(inputs)
        out, change = _reference_jvp(model, list(delta), delta, inputs)
        torch.testing.assert_close(out, z_pre, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(z_lin, z_pre + change, atol=1e-5, rtol=1e-5)
        assert not torch.allclose(z_lin, z_pre, atol=1e-4)  # the delta did change the output
        with torch.no_grad():
            torch.testing.assert_close(LinearizedEncoder(model, {})._forward_tower(inputs), z_pre)


def test_linear_finetune_learns_and_its_task_vector_applies_as_a_weight_delta(setup):
    model = setup.models["m0"]
    spec = setup.tasks["t0"]
    x, y = spec.test.inputs, spec.test.labels
    before = {k: v.clone() for k, v in model.module.state_dict().items()}
    lin, losses = finetune(model, x, y, spec.prompts, FinetuneConfig(mode="linear", steps=30, batch_size=32, lr=1e-2), progress=False)
    assert isinstance(lin, LinearizedEncoder) and losses[-1] < losses[0]
    assert all(torch.equal(before[k], v) for k, v in model.module.state_dict().items())  # theta_0 untouched
    tau = lin.task_vector()
    assert set(tau.deltas) == set(linearisable_names(model)) and all(v.dtype == torch.float32 for v in tau.deltas.values())
    z0 = model.encode_probes(x).z
    z1 = lin.encode_probes(x).z
    torch.testing.assert_close(LinearizedEncoder(model, {}).with_delta(tau, 1.0).encode_probes(x).z, z1, atol=1e-5, rtol=1e-5)
    half = LinearizedEncoder(model, {}).with_delta(tau, 0.5).encode_probes(x).z
    torch.testing.assert_close(half, z0 + 0.5 * (z1 - z0), atol=1e-5, rtol=1e-5)  # linear in the task vector
    with_ortho, _ = finetune(model, x, y, spec.prompts, FinetuneConfig(mode="linear", steps=5, batch_size=32, lr=1e-2, orthoreg=1.0),
                             progress=False)
    assert with_ortho.task_vector().norm() > 0
    with pytest.raises(InvalidInputError, match="another model"):
        LinearizedEncoder(model, {"not.a.weight": torch.zeros(1)})
    with pytest.raises(InvalidInputError, match="no checkpoint format"):
        lin.save("x.safetensors")


def test_task_vectors_keep_float32_and_merge_in_one_buffer(setup):
    model = setup.models["m0"]
    vectors = []
    for seed in range(8):
        other = model.copy_for_new_weights()
        with torch.no_grad():
            for p in other.module.parameters():
                p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed)))
        vectors.append(TaskVector.from_models(model.module, other.module))
    assert all(v.dtype == torch.float32 for tau in vectors for v in tau.deltas.values())
    merged = TaskVector.merge(vectors)
    assert all(v.dtype == torch.float32 for v in merged.deltas.values())
    for k, v in merged.deltas.items():
        torch.testing.assert_close(v, sum(tau.deltas[k] for tau in vectors))
        assert all(v.data_ptr() != tau.deltas[k].data_ptr() for tau in vectors)  # inputs are not overwritten
    assert all(v.dtype == torch.float32 for v in (vectors[0] + vectors[1] - 0.5 * vectors[2]).deltas.values())
    edited = merged.apply_to(model.module, 0.3)
    assert all(p.dtype == torch.float32 for p in edited.parameters())
    ref = dict(model.module.named_parameters())
    for k, p in edited.named_parameters():
        torch.testing.assert_close(p, ref[k] + 0.3 * merged.deltas[k])
    with pytest.raises(InvalidInputError, match="coefficients"):
        TaskVector.merge(vectors, [1.0])
    with pytest.raises(InvalidInputError, match="one dtype"):
        TaskVector.from_models(model.module, model.copy_for_new_weights().module.double())
