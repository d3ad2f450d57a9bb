"""Artifacts: safetensors + JSON metadata, atomic writes, clear errors for bad files, no pickle."""

import json
import os

import pytest
import torch
from helpers import make_descriptor
from safetensors.torch import save_file

from platonic import ArtifactError, Descriptor, Operator, OperatorBank
from platonic.bank import Term
from platonic.storage import FORMAT_VERSION, read_header


def make_operator(task="toy", source="model-a", target="fp-target", d=4, seed=0):
    delta = torch.randn(d, d, generator=torch.Generator().manual_seed(seed))
    return Operator(delta=delta, form="linear", target=target, terms=(Term(1.0, source, task),))


def test_descriptor_round_trip(tmp_path):
    d = make_descriptor(seed=3)
    path = tmp_path / "d.utd"
    d.save(path)
    back = Descriptor.load(path)
    assert torch.equal(back.matrix, d.matrix)
    assert back.grid == d.grid and back.provenance == d.provenance
    header = read_header(path)
    assert header["kind"] == "descriptor" and header["format_version"] == FORMAT_VERSION


def test_operator_and_bank_round_trip(tmp_path):
    op = make_operator()
    op.save(tmp_path / "op.pt")
    back = Operator.load(tmp_path / "op.pt")
    assert torch.equal(back.delta, op.delta) and back.terms == op.terms and back.target == op.target
    bank = OperatorBank("fp-target", [make_operator("a", seed=1), make_operator("b", seed=2), make_operator("a", "model-b", seed=3)])
    bank.save(tmp_path / "bank")
    loaded = OperatorBank.load(tmp_path / "bank")
    assert loaded.target == bank.target and len(loaded) == 3
    for key, entry in bank.entries.items():
        assert torch.equal(loaded.entries[key].delta, entry.delta)


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "d.utd"
    make_descriptor(seed=1).save(path)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("platonic.storage.save_file", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        make_descriptor(seed=2).save(path)
    assert path.read_bytes() == before  # old file intact
    assert os.listdir(tmp_path) == ["d.utd"]  # no temp file left behind


def test_truncated_file_gives_clear_error(tmp_path):
    path = tmp_path / "d.utd"
    make_descriptor().save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match="truncated"):
        Descriptor.load(path)
    path.write_bytes(data[:5])
    with pytest.raises(ArtifactError, match="not a readable safetensors file"):
        Descriptor.load(path)


def test_foreign_files_give_clear_errors(tmp_path):
    ckpt = tmp_path / "model.safetensors"
    save_file({"w": torch.zeros(2)}, str(ckpt))
    with pytest.raises(ArtifactError, match="not a platonic artifact"):
        Descriptor.load(ckpt)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ArtifactError, match="not a readable safetensors file"):
        Descriptor.load(text)
    with pytest.raises(ArtifactError, match="does not exist"):
        Descriptor.load(tmp_path / "missing.utd")


def test_wrong_kind_and_newer_version_are_named(tmp_path):
    make_operator().save(tmp_path / "op")
    with pytest.raises(ArtifactError, match="holds a 'operator', not a 'descriptor'"):
        Descriptor.load(tmp_path / "op")
    record = {"format": "platonic", "format_version": FORMAT_VERSION + 1, "kind": "descriptor"}
    save_file({"matrix": torch.zeros(1, 1)}, str(tmp_path / "new"), metadata={"platonic": json.dumps(record)})
    with pytest.raises(ArtifactError, match="Upgrade platonic"):
        Descriptor.load(tmp_path / "new")


def test_incomplete_artifact_names_what_is_missing(tmp_path):
    record = {"format": "platonic", "format_version": FORMAT_VERSION, "kind": "descriptor"}
    save_file({"other": torch.zeros(1, 1)}, str(tmp_path / "bad"), metadata={"platonic": json.dumps(record)})
    with pytest.raises(ArtifactError, match="missing tensor 'matrix'"):
        Descriptor.load(tmp_path / "bad")


def test_artifacts_are_safetensors_not_pickle(tmp_path):
    make_descriptor().save(tmp_path / "d")
    raw = (tmp_path / "d").read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + header_len])
    assert "matrix" in header and "__metadata__" in header
    assert b"\x80\x04" not in raw[:2]  # no pickle protocol marker at the start


def test_writing_to_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ArtifactError, match="does not exist; create it first"):
        make_descriptor().save(tmp_path / "nope" / "d.utd")
