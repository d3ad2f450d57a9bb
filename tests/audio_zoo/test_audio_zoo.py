"""The audio zoo (issue 15, item 2): architectures, exact folding through every edit site, inputs, errors."""

import pytest
import torch

from platonic.bank import Operator, Term
from platonic.edit import AppendedLinearSite, HeadAffineSite, LinearSite, ProjectionParameter, fold, unfold
from platonic.errors import InvalidInputError, PlatonicError
from platonic.world.audio import canonical, zoo
from platonic.world.audio.nets import log_mel, mel_filterbank

ALPHA = 0.5
SITES = {"cnn": LinearSite, "ast-s": ProjectionParameter, "ast-l": HeadAffineSite, "wav": AppendedLinearSite}
TOWER_TYPES = {"cnn": "mel_cnn", "ast-s": "mel_vit", "ast-l": "mel_map", "wav": "wave_conv"}


def rel(a, b):
    return float((a - b).norm() / b.norm())


@pytest.fixture(scope="module")
def models():
    """Every audio zoo model with freshly initialised (seeded) weights: folding needs no training."""
    return {n: zoo.model_from_state(s, zoo.build_module(s, s.seed).state_dict()) for n, s in zoo.SPECS.items()}


@pytest.fixture(scope="module")
def clips():
    g = torch.Generator().manual_seed(0)
    return torch.round(0.3 * torch.randn(12, canonical.CLIP_SAMPLES, generator=g).clamp(-3, 3) * 32768 / 3) / 32768


def test_at_least_four_models_that_differ_in_tower_type_width_and_depth():
    specs = zoo.SPECS
    assert len(specs) >= 4
    assert {n: s.arch for n, s in specs.items()} == TOWER_TYPES
    assert {s.frontend["kind"] for s in specs.values()} == {"mel", "wave"}
    assert len({s.embed_dim for s in specs.values()}) >= 2
    vits = [specs["ast-s"].arch_kwargs, specs["ast-l"].arch_kwargs]
    assert vits[0]["width"] != vits[1]["width"] and vits[0]["depth"] != vits[1]["depth"]
    assert len({s.seed for s in specs.values()}) == len(specs)


@pytest.mark.parametrize("name", list(SITES))
def test_every_audio_model_folds_exactly_and_unfolds_bit_for_bit(models, clips, name):
    m = models[name]
    site = m.edit_site
    assert isinstance(site, SITES[name]) and m.modality == "audio"
    before = m.encode_probes(clips)
    assert before.z.shape == (len(clips), m.embed_dim)
    g = torch.Generator().manual_seed(1)
    if isinstance(site, HeadAffineSite):
        B = 0.05 * torch.randn(site.in_dim + 1, site.out_dim, generator=g)
        op = Operator(delta=B, form="head_affine", target=m.fingerprint, terms=(Term(1.0, "s", "t"),))
        predicted = before.z + ALPHA * torch.cat([before.u, torch.ones(len(before.u), 1)], 1) @ B
    else:
        A = 0.3 * torch.randn(m.embed_dim, m.embed_dim, generator=g)
        op = Operator(delta=A, form="linear", target=m.fingerprint, terms=(Term(1.0, "s", "t"),))
        predicted = before.z @ (torch.eye(m.embed_dim) + ALPHA * A).T
    n_params = sum(p.numel() for p in m.module.parameters())
    record = fold(site, op, ALPHA)
    after = m.encode_probes(clips).z
    assert rel(after, predicted) < 1e-4
    assert torch.allclose(site.embedding_change(before, op.delta), (predicted - before.z) / ALPHA, rtol=1e-4, atol=1e-5)
    assert sum(p.numel() for p in m.module.parameters()) == n_params
    unfold(record)
    assert torch.equal(m.encode_probes(clips).z, before.z)


@pytest.mark.parametrize("name", list(SITES))
def test_inputs_are_the_models_own_front_end_of_the_same_canonical_clips(models, clips, name):
    m = models[name]
    x = m.prepare_probes(clips)
    spec = m.model_spec
    if spec.frontend["kind"] == "wave":
        assert x.shape == (len(clips), 1, canonical.CLIP_SAMPLES * spec.rate // canonical.SAMPLE_RATE)
        assert torch.equal(x[:, 0], canonical.resample(clips, canonical.SAMPLE_RATE, spec.rate))
    else:
        assert x.shape == (len(clips), 1, spec.frontend["n_mels"], spec.frames())
    assert torch.isfinite(x).all()
    assert torch.equal(m.encode_audio(clips), m.encode_probes(clips).z)


def test_log_mel_separates_low_and_high_tones():
    t = torch.arange(canonical.CLIP_SAMPLES) / canonical.SAMPLE_RATE
    low, high = torch.sin(2 * torch.pi * 220 * t), torch.sin(2 * torch.pi * 3000 * t)
    x = log_mel(torch.stack([low, high]), 16000, 400, 160, 64)[:, 0]  # (2, 64, frames)
    peaks = x.mean(-1).argmax(-1)
    assert peaks[0] < peaks[1]
    fb = mel_filterbank(16000, 400, 64)
    assert fb.shape == (64, 201) and float(fb.max()) <= 1.0 + 1e-6 and (fb.sum(1) > 0).all()


@pytest.mark.parametrize("bad", [torch.zeros(3, 8000), torch.zeros(3, 16000, dtype=torch.int16), torch.zeros(16000),
                                 torch.zeros(2, 3, 32, 32)])
def test_wrong_inputs_are_one_platonic_error_naming_the_fix(models, bad):
    with pytest.raises(InvalidInputError, match="16000") as info:
        models["cnn"].prepare_probes(bad)
    assert isinstance(info.value, PlatonicError) and "\n" not in str(info.value)


def test_an_audio_model_refuses_image_encoding(models):
    with pytest.raises(InvalidInputError, match="encode_audio"):
        models["wav"].encode_images(torch.zeros(1, 3, 32, 32, dtype=torch.uint8))


def test_same_seed_same_initial_weights_other_seed_other():
    s = zoo.SPECS["ast-s"]
    a, b, c = (zoo.build_module(s, k).state_dict() for k in (3, 3, 4))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_a_missing_weights_file_names_the_audio_build(tmp_path):
    from platonic.errors import ArtifactError
    from platonic.world.audio.build import load_weights

    with pytest.raises(ArtifactError, match="platonic world audio-build"):
        load_weights(tmp_path / "base.safetensors")
