"""Memory (issue 36): a large evaluation set stays lazy (decoded batch by batch), and an embedding-cache miss of
many batches is encoded chunk by chunk, each chunk on disk, resumed after a kill, with the same bits as one
pass. Sizes are shrunk by monkeypatching the thresholds (20,000 rows, 64 batches) to a few images."""

import pytest
import torch
from tiny_models import clip_tokenizer, tiny_hf
from image_folders import write_image_folder

import platonic.measurement as measurement
from platonic.data.resolve import open_task
from platonic.data.splits import LazyImages
from platonic.experiments.engine import EvalSet, ExperimentSetup, FeatureStore
from platonic.experiments.setups import data as setup_data
from platonic.experiments.setups.schema import DataSetConfig
from platonic.measurement import EmbeddingCache


@pytest.fixture
def split(tmp_path):
    write_image_folder(tmp_path / "reds", ("crimson", "scarlet"), {"train": 2, "test": 9}, 0)
    task = open_task("reds", str(tmp_path / "reds"))
    return task.split("test")


def test_a_large_evaluation_set_is_lazy_and_encodes_as_the_decoded_one(split, monkeypatch):
    monkeypatch.setattr(setup_data, "LAZY_ROWS", 10)
    lazy, _, _ = setup_data.read_test_split("reds", DataSetConfig(data=str(split.source)), 224, None)
    monkeypatch.setattr(setup_data, "LAZY_ROWS", 100)
    eager, _, _ = setup_data.read_test_split("reds", DataSetConfig(data=str(split.source)), 224, None)
    assert isinstance(lazy.inputs, LazyImages) and isinstance(eager.inputs, torch.Tensor) and len(lazy.inputs) == 18
    model = tiny_hf("clip", tokenizer=clip_tokenizer())
    assert torch.equal(model.encode_probes(lazy.inputs, batch_size=4).z, model.encode_probes(eager.inputs, batch_size=4).z)
    setup = ExperimentSetup("lazy", {"m": model}, {}, {"lazy": lazy, "eager": eager}, {})
    store = FeatureStore(setup)
    assert store.accuracy("m", lazy) == store.accuracy("m", eager)
    assert store.cache.probes_path(model, lazy.inputs) != store.cache.probes_path(model, eager.inputs)


def test_a_long_miss_is_kept_chunk_by_chunk_and_resumes_after_a_kill(split, monkeypatch):
    monkeypatch.setattr(measurement, "STREAM_BATCHES", 2)  # chunks of 2 batches of 2 images: 5 chunks of 18 images
    inputs = split.lazy(224)
    model = tiny_hf("clip", tokenizer=clip_tokenizer())
    whole = model.encode_probes(inputs.materialise(), batch_size=2)
    calls, real = [], measurement.encode_shared

    def dies_at_the_third_chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # as a kill would stop it
        return real(*args, **kwargs)

    cache = EmbeddingCache()
    path = cache.probes_path(model, inputs)
    monkeypatch.setattr(measurement, "encode_shared", dies_at_the_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        cache.probes(model, inputs, batch_size=2, progress=False)
    parts = path.with_name(path.name + ".parts")
    assert sorted(p.name for p in parts.iterdir() if not p.name.startswith(".")) == ["000000.safetensors",
                                                                                      "000001.safetensors"]
    calls.clear()
    monkeypatch.setattr(measurement, "encode_shared", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = cache.probes(model, inputs, batch_size=2, progress=False)
    assert len(calls) == 3 and path.is_file() and not parts.exists()  # only the 3 chunks not kept were encoded
    assert torch.equal(got.z, whole.z) and torch.equal(cache.probes(model, inputs, batch_size=2).z, whole.z)


def test_a_lazy_set_is_named_by_its_rows_without_decoding(split):
    rows = torch.tensor([0, 5, 9])
    a, b = split.subset(rows).lazy(224), split.subset(torch.tensor([0, 5, 10])).lazy(224)
    assert a.digest() != b.digest() and a.digest() == split.subset(rows).lazy(224).digest()
    assert a.digest() != split.subset(rows).lazy(112).digest()
    assert EvalSet("x", a, split.labels[rows], ("p",)).inputs is a
