"""Descriptor, ProbeGrid and Composition: checked algebra and ill-formed input."""

import pytest
import torch
from helpers import make_descriptor, make_grid

from platonic import Composition, Descriptor, GridMismatchError, InvalidInputError, ProbeGrid, digest_probes, mean


def test_same_grid_algebra_is_matrix_algebra():
    a, b = make_descriptor(seed=1), make_descriptor(seed=2, source="model-b")
    assert torch.equal((a + b).matrix, a.matrix + b.matrix)
    assert torch.equal((a - b).matrix, a.matrix - b.matrix)
    assert torch.equal((-a).matrix, -a.matrix)
    assert torch.equal((0.5 * a).matrix, a.matrix * 0.5)
    assert torch.equal((a * 2).matrix, a.matrix * 2)
    assert torch.allclose((a / 4).matrix, a.matrix / 4)
    assert isinstance(a + b, Descriptor) and (a + b).grid == a.grid


def test_sum_and_mean_of_several_sources():
    ds = [make_descriptor(seed=s, source=f"m{s}") for s in range(3)]
    total = sum(ds)
    assert isinstance(total, Descriptor)
    assert torch.allclose(total.matrix, ds[0].matrix + ds[1].matrix + ds[2].matrix)
    assert torch.allclose(mean(ds).matrix, total.matrix / 3)
    assert torch.allclose(Descriptor.mean(ds).matrix, total.matrix / 3)
    assert "mean(m0, m1, m2)" == mean(ds).provenance.source


def test_invariants_double_negation_and_self_difference():
    a = make_descriptor(seed=3)
    assert torch.equal((-(-a)).matrix, a.matrix)
    assert (a - a).norm() == 0


def test_norm_and_cosine():
    a = make_descriptor(seed=4)
    assert a.norm() == pytest.approx(float(a.matrix.double().norm()))
    assert a.cosine(a) == pytest.approx(1.0)
    assert a.cosine(-2 * a) == pytest.approx(-1.0)
    b = make_descriptor(seed=5)
    expected = float((a.matrix.double() * b.matrix.double()).sum() / (a.matrix.double().norm() * b.matrix.double().norm()))
    assert a.cosine(b) == pytest.approx(expected)


def test_different_grids_make_a_composition_realised_term_by_term():
    a = make_descriptor(make_grid("eurosat", n=6, m=3))
    b = make_descriptor(make_grid("dtd", n=5, m=4, seed=9))
    comp = a - 0.5 * b
    assert isinstance(comp, Composition)
    assert comp.tasks == ("eurosat", "dtd")
    # realise: sum_l c_l f(U_l) for a linear f (here the sum of entries), as the solve is linear in U
    total = lambda d: float(d.matrix.double().sum())  # noqa: E731
    assert comp.realise(total) == pytest.approx(total(a) - 0.5 * total(b))
    # scalars applied to a composition scale its coefficients
    doubled = 2 * comp
    assert [c for c, _ in doubled.terms] == [2 * c for c, _ in comp.terms]
    assert doubled.realise(total) == pytest.approx(2 * comp.realise(total))
    assert (-comp).realise(total) == pytest.approx(-comp.realise(total))
    assert (comp / 2).realise(total) == pytest.approx(comp.realise(total) / 2)
    assert len(sum([a, b])) == 2  # sum() over mixed grids gives a Composition


def test_merged_sums_terms_on_one_grid():
    g1, g2 = make_grid("eurosat"), make_grid("dtd", seed=7)
    a1, a2, b = make_descriptor(g1, 1), make_descriptor(g1, 2), make_descriptor(g2, 3)
    comp = Composition([(1.0, a1), (1.0, b), (-2.0, a2)]).merged()
    assert len(comp) == 2
    merged_a = next(d for c, d in comp.terms if d.task == "eurosat")
    assert torch.allclose(merged_a.matrix, a1.matrix - 2 * a2.matrix)


def test_cosine_and_mean_refuse_different_grids_naming_the_difference():
    a = make_descriptor(make_grid("eurosat"))
    b = make_descriptor(make_grid("eurosat", seed=1))  # other probes
    with pytest.raises(GridMismatchError, match="probe digest"):
        a.cosine(b)
    c = make_descriptor(make_grid("eurosat", prompts=["x", "y", "z"]))
    with pytest.raises(GridMismatchError, match="prompts"):
        mean([a, c])


def test_random_like_matches_shape_and_norm_and_is_seeded():
    a = make_descriptor(seed=6)
    r1, r2 = a.random_like(seed=42), a.random_like(seed=42)
    assert r1.shape == a.shape and r1.norm() == pytest.approx(a.norm(), rel=1e-6)
    assert torch.equal(r1.matrix, r2.matrix)
    assert not torch.equal(r1.matrix, a.random_like(seed=43).matrix)


def test_from_embeddings_is_difference_of_normalised_affinities():
    grid = make_grid(n=4, m=2)
    g = torch.Generator().manual_seed(0)
    f_pre, f_ft, txt = torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g), torch.randn(2, 5, generator=g)
    d = Descriptor.from_embeddings(f_pre, 3 * f_ft, txt, grid)
    n = lambda x: x / x.norm(dim=1, keepdim=True)  # noqa: E731
    assert torch.allclose(d.matrix, n(f_ft) @ n(txt).T - n(f_pre) @ n(txt).T, atol=1e-6)
    assert Descriptor.from_embeddings(f_pre, f_pre, txt, grid).norm() == 0  # a model minus itself


def test_digest_is_content_hash():
    x = torch.zeros(2, 3, dtype=torch.uint8)
    assert digest_probes(x) == digest_probes(x.clone())
    assert digest_probes(x) != digest_probes(x.float())
    y = x.clone()
    y[1, 2] = 1
    assert digest_probes(x) != digest_probes(y)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(prompts=()), "no prompts"),
        (dict(prompts=("a", "b", "a")), "duplicate prompt 'a' at positions 0 and 2"),
        (dict(task=""), "task must be a non-empty"),
        (dict(probe_digest="abc"), "sha256"),
        (dict(n_probes=0), "n_probes must be a positive"),
        (dict(prompts="abc"), "sequence of strings"),
    ],
)
def test_ill_formed_grids_raise_named_errors(kwargs, match):
    base = dict(task="t", prompts=("a", "b"), probe_digest="0" * 64, n_probes=3)
    with pytest.raises(InvalidInputError, match=match):
        ProbeGrid(**{**base, **kwargs})


@pytest.mark.parametrize(
    "matrix,match",
    [
        (torch.full((6, 3), float("nan")), "NaN/Inf"),
        (torch.zeros(6), "2-D matrix"),
        (torch.zeros(6, 4), r"expected \(6, 3\)"),
        (torch.zeros(0, 3), "empty"),
    ],
)
def test_ill_formed_descriptors_raise_named_errors(matrix, match):
    with pytest.raises(InvalidInputError, match=match):
        Descriptor(matrix, make_grid())


def test_scalar_checks():
    a = make_descriptor()
    with pytest.raises(InvalidInputError, match="finite"):
        a * float("inf")
    with pytest.raises(InvalidInputError, match="by zero"):
        a / 0
    with pytest.raises(TypeError):
        a * a
    with pytest.raises(TypeError):
        a + 1
