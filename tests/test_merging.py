"""Merge rules of task vectors (platonic.merging) against brute-force references on small tensors."""

import itertools

import pytest
import torch

from platonic import InvalidInputError, TaskVector
from platonic.merging import MERGE_RULES, dare_merge, drop_and_rescale, iso_c_merge, sum_merge, ties_merge, trim, tsv_merge


def _vectors(n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{"w": torch.randn(4, 3, generator=g), "b": torch.randn(5, generator=g)} for _ in range(n)]


def _flat(d):
    return [float(x) for k in d for x in d[k].reshape(-1)]


def _unflat(values, like):
    out, i = {}, 0
    for k, v in like.items():
        out[k] = torch.tensor(values[i : i + v.numel()], dtype=v.dtype).reshape(v.shape)
        i += v.numel()
    return out


def _ties_reference(deltas, density):
    """Entry by entry: keep each vector's k largest magnitudes, elect the sign of the trimmed sum, average the agreeing."""
    flats = [_flat(d) for d in deltas]
    n = len(flats[0])
    k = max(1, int(n * density))
    trimmed = []
    for f in flats:
        threshold = sorted(abs(x) for x in f)[n - k]
        trimmed.append([x if abs(x) >= threshold else 0.0 for x in f])
    majority = 1.0 if sum(sum(t) for t in trimmed) >= 0 else -1.0
    merged = []
    for i in range(n):
        column = [t[i] for t in trimmed]
        s = sum(column)
        sign = majority if s == 0 else (1.0 if s > 0 else -1.0)
        agreeing = [x for x in column if x * sign > 0]
        merged.append(sum(agreeing) / len(agreeing) if agreeing else 0.0)
    return _unflat(merged, deltas[0])


@pytest.mark.parametrize("density", [0.2, 0.5, 1.0])
def test_ties_is_trim_elect_sign_disjoint_mean(density):
    deltas = _vectors(3)
    got, want = ties_merge(deltas, density), _ties_reference(deltas, density)
    for k in want:
        assert torch.allclose(got[k], want[k], atol=1e-6)


def test_ties_trim_keeps_the_largest_magnitudes_over_the_whole_vector():
    d = {"a": torch.tensor([0.1, -5.0, 0.2]), "b": torch.tensor([3.0, -0.3])}
    t = trim(d, density=0.4)  # 2 of 5 entries: -5 and 3, wherever they are
    assert t["a"].tolist() == [0.0, -5.0, 0.0] and t["b"].tolist() == [3.0, 0.0]
    # a hand-made case: signs disagree, the elected sign is the larger mass, the mean only of the agreeing
    merged = ties_merge([{"x": torch.tensor([2.0, 1.0])}, {"x": torch.tensor([-1.0, 3.0])}, {"x": torch.tensor([4.0, -0.5])}], 1.0)
    assert merged["x"].tolist() == [3.0, 2.0]


def test_dare_drops_with_the_seeded_draw_and_rescales():
    delta = _vectors(1)[0]
    p, seed = 0.5, 7
    got = drop_and_rescale(delta, p, seed)
    g = torch.Generator().manual_seed(seed)
    for k in sorted(delta):  # brute force: the same uniform draws, entry by entry
        u = torch.rand(delta[k].shape, generator=g).reshape(-1).tolist()
        want = [x / (1 - p) if ui >= p else 0.0 for x, ui in zip(delta[k].reshape(-1).tolist(), u)]
        assert torch.allclose(got[k].reshape(-1), torch.tensor(want), atol=1e-6)
    assert all(torch.equal(got[k], drop_and_rescale(delta, p, seed)[k]) for k in delta)  # the same seed, the same mask
    assert any(not torch.equal(got[k], drop_and_rescale(delta, p, seed + 1)[k]) for k in delta)
    assert all(torch.equal(drop_and_rescale(delta, 0.0, seed)[k], delta[k]) for k in delta)


def test_dare_is_unbiased_and_dare_merge_sums_one_draw_per_vector():
    big = {"w": torch.ones(200, 200)}
    mean = torch.stack([drop_and_rescale(big, 0.5, s)["w"] for s in range(20)]).mean()
    assert abs(float(mean) - 1.0) < 0.01
    deltas = _vectors(3)
    merged = dare_merge(deltas, 0.3, seed=5)
    want = sum_merge([drop_and_rescale(d, 0.3, 5 + t) for t, d in enumerate(deltas)])
    assert all(torch.equal(merged[k], want[k]) for k in want)


def test_iso_c_flattens_the_spectrum_of_the_sum():
    deltas = _vectors(3)
    merged = iso_c_merge(deltas)
    total = sum_merge(deltas)
    s = torch.linalg.svdvals(total["w"].double())
    got = torch.linalg.svdvals(merged["w"].double())
    assert torch.allclose(got, torch.full_like(got, float(s.mean())), atol=1e-5)
    # the same singular vectors: the merged matrix is a multiple of the polar factor of the sum
    u, _, vh = torch.linalg.svd(total["w"].double(), full_matrices=False)
    assert torch.allclose(merged["w"].double(), s.mean() * u @ vh, atol=1e-5)
    assert torch.equal(merged["b"], total["b"])  # vectors are summed


def test_task_vector_merge_dispatches_rules_with_coefficients():
    taus = [TaskVector(d) for d in _vectors(3)]
    for rule in MERGE_RULES:
        merged = TaskVector.merge(taus, rule=rule)
        direct = MERGE_RULES[rule].merge([t.deltas for t in taus])
        assert all(torch.equal(merged.deltas[k], direct[k]) for k in direct)
    scaled = TaskVector.merge(taus, [1.0, 2.0, -1.0], rule="ties", density=0.5)
    want = ties_merge([taus[0].deltas, (2.0 * taus[1]).deltas, (-1.0 * taus[2]).deltas], 0.5)
    assert all(torch.allclose(scaled.deltas[k], want[k]) for k in want)
    plain = TaskVector.merge(taus)
    assert all(torch.allclose(plain.deltas[k], sum(t.deltas[k] for t in taus)) for k in plain.deltas)


@pytest.mark.parametrize("call,match", [
    (lambda t: TaskVector.merge(t, rule="magic"), "unknown merge rule"),
    (lambda t: TaskVector.merge(t, density=0.2), "takes no settings"),
    (lambda t: TaskVector.merge(t, rule="ties", density=0.0), "density"),
    (lambda t: TaskVector.merge(t, rule="dare", p=1.0), "drop rate"),
    (lambda t: TaskVector.merge([t[0], TaskVector({"other": torch.ones(2)})], rule="ties"), "different architectures"),
])
def test_merge_errors(call, match):
    taus = [TaskVector(d) for d in _vectors(2)]
    with pytest.raises(InvalidInputError, match=match):
        call(taus)


def test_rules_keep_the_dtype():
    halves = [{k: v.half() for k, v in d.items()} for d in _vectors(2)]
    for rule in MERGE_RULES.values():
        assert all(v.dtype == torch.float16 for v in rule.merge(halves).values())
    assert list(itertools.islice(MERGE_RULES, 5)) == ["sum", "ties", "dare", "iso_c", "tsv_m"]


def test_tsv_m_against_a_reference_built_another_way():
    """Stack each task's top min(m, n) // T singular triplets; orthonormalise U and V by (A^T A)^(-1/2)
    (the polar factor, computed by an eigendecomposition, not an SVD); vectors are averaged."""
    g = torch.Generator().manual_seed(4)
    deltas = [{"w": torch.randn(6, 5, generator=g, dtype=torch.float64), "b": torch.randn(3, generator=g, dtype=torch.float64)}
              for _ in range(2)]
    r = 5 // 2
    us, ss, vs = [], [], []
    for d in deltas:
        u, s, vh = torch.linalg.svd(d["w"], full_matrices=False)
        us.append(u[:, :r]), ss.append(s[:r]), vs.append(vh[:r].T)

    def polar(a):
        evals, evecs = torch.linalg.eigh(a.T @ a)
        return a @ evecs @ torch.diag(evals.rsqrt()) @ evecs.T

    want = polar(torch.cat(us, 1)) @ torch.diag(torch.cat(ss)) @ polar(torch.cat(vs, 1)).T
    got = tsv_merge(deltas)
    assert torch.allclose(got["w"], want, atol=1e-9)
    assert torch.allclose(got["b"], (deltas[0]["b"] + deltas[1]["b"]) / 2)
    # tasks in orthogonal subspaces do not interfere: TSV-M is then the sum of the truncated vectors
    e = torch.eye(4, dtype=torch.float64)
    a = {"w": 3 * torch.outer(e[0], e[1]) + torch.outer(e[1], e[0])}  # rank 2 = 4 // 2 in span(e0, e1)
    b = {"w": 2 * torch.outer(e[2], e[3]) - 0.5 * torch.outer(e[3], e[2])}  # rank 2 in span(e2, e3)
    assert torch.allclose(tsv_merge([a, b])["w"], a["w"] + b["w"], atol=1e-12)
