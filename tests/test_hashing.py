"""Content digests of tensors, and the experiment engine's memory of its inputs' digests (`remembered_digests`)."""

import gc

import torch

from platonic import hashing
from platonic.descriptor import digest_probes
from platonic.hashing import input_digest, remembered_digests, tensor_digest


def counting(monkeypatch) -> list:
    calls = []
    real = hashing.tensor_digest

    def digest(t):
        calls.append(tuple(t.shape))
        return real(t)

    monkeypatch.setattr(hashing, "tensor_digest", digest)
    return calls


def test_inside_the_block_an_unchanged_tensor_is_hashed_once(monkeypatch):
    calls = counting(monkeypatch)
    x = torch.arange(12.0).reshape(3, 4)
    with remembered_digests():
        first = [input_digest(x), digest_probes(x), input_digest(x)]
    assert first == [tensor_digest(x)] * 3 and len(calls) == 1
    input_digest(x)  # outside the block nothing is remembered
    assert len(calls) == 2


def test_a_tensor_changed_in_place_or_through_a_view_is_hashed_again(monkeypatch):
    calls = counting(monkeypatch)
    x = torch.zeros(4, 3)
    with remembered_digests():
        before = input_digest(x)
        x.add_(1)
        after_inplace = input_digest(x)
        x[1:2].mul_(5)  # a view shares the tensor's version counter
        after_view = input_digest(x)
        assert input_digest(x.T) == tensor_digest(x.T)  # same storage, other layout
    assert len({before, after_inplace, after_view}) == 3 and len(calls) == 4  # each change hashed afresh
    assert after_view == tensor_digest(x)


def test_a_new_tensor_in_a_freed_ones_place_is_not_taken_for_it():
    with remembered_digests():
        for k in range(20):  # ids (and storage) of freed tensors come back; the weak reference tells them apart
            t = torch.full((8,), float(k))
            assert input_digest(t) == tensor_digest(t)
            del t
            gc.collect()


def test_nested_blocks_share_the_outer_memory(monkeypatch):
    calls = counting(monkeypatch)
    x = torch.ones(5)
    with remembered_digests():
        input_digest(x)
        with remembered_digests():
            input_digest(x)
        input_digest(x)  # the inner block's end did not drop the outer memory
    assert len(calls) == 1
