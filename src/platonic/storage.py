"""Artifacts on disk: safetensors tensors plus one JSON metadata record. Never pickle.

Every platonic file is a safetensors file whose header metadata has one key, "platonic", holding
JSON: {"format": "platonic", "format_version": 1, "kind": "descriptor" | "operator" | "bank", ...}.
Writes go to a temporary file in the target directory and are renamed into place, so a reader sees
either the old file or the whole new one. Loading reads tensors and JSON only; it executes no code.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .errors import ArtifactError

FORMAT_NAME = "platonic"
FORMAT_VERSION = 1
KINDS = ("descriptor", "operator", "bank")


def atomic_write(path, write) -> Path:
    """Call write(tmp_path) on a temporary file next to `path`, then rename it to `path`."""
    path = Path(path)
    if path.is_dir():
        raise ArtifactError(f"{path} is a directory; give a file name to write to")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        raise ArtifactError(f"cannot write {path}: directory {parent} does not exist; create it first")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_directory(path, write, replaceable) -> Path:
    """Fill a temporary directory beside `path` with write(tmp_dir), then rename it into place.

    An existing `path` is replaced only when `replaceable(path)` says it is a previous artifact of the
    same kind; it is swapped (old renamed aside, new renamed in, old deleted), so a reader, or a kill
    at any moment, finds the old or the new directory, never neither. Anything else is refused.
    """
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ArtifactError(f"cannot write {path}: directory {parent} does not exist; create it first")
    if path.exists() and not (path.is_dir() and replaceable(path)):
        raise ArtifactError(f"{path} exists and is not a previous output of this kind; choose a new path or remove it")
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent))
    old = None
    try:
        write(tmp)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=parent))
            os.rmdir(old)
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and old.exists() and not path.exists():
            os.replace(old, path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return path


def write_artifact(path, kind: str, tensors: dict[str, torch.Tensor], meta: dict) -> Path:
    """Atomically write `tensors` and JSON-serialisable `meta` as a platonic artifact of `kind`."""
    if kind not in KINDS:
        raise ValueError(f"unknown artifact kind {kind!r}")
    record = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "kind": kind, **meta}
    metadata = {FORMAT_NAME: json.dumps(record, sort_keys=True)}
    payload = {name: t.detach().cpu().contiguous() for name, t in tensors.items()}
    return atomic_write(path, lambda tmp: save_file(payload, tmp, metadata=metadata))


def read_header(path) -> dict:
    """The JSON record of a platonic artifact, without loading its tensors."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path} does not exist")
    if path.is_dir():
        raise ArtifactError(f"{path} is a directory, not a platonic file")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types for bad headers
        raise ArtifactError(
            f"{path} is not a readable safetensors file ({type(exc).__name__}: {exc}); "
            "it may be truncated or of another format — re-create it with platonic"
        ) from None
    raw = metadata.get(FORMAT_NAME)
    if raw is None:
        raise ArtifactError(
            f"{path} is a safetensors file but not a platonic artifact (no '{FORMAT_NAME}' metadata); "
            "it may be a model checkpoint — pass a descriptor, operator or bank file"
        )
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{path}: its platonic metadata is not valid JSON ({exc})") from None
    version = record.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ArtifactError(
            f"{path} has format version {version!r}; this platonic reads up to {FORMAT_VERSION}. Upgrade platonic."
        )
    return record


def read_artifact(path, kind: str | None = None) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, record) of a platonic artifact; checks the kind when given."""
    record = read_header(path)
    if kind is not None and record.get("kind") != kind:
        raise ArtifactError(f"{path} holds a {record.get('kind')!r}, not a {kind!r}; pass a {kind} file")
    try:
        with safe_open(str(path), framework="pt") as f:
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except Exception as exc:  # noqa: BLE001
        raise ArtifactError(f"{path}: its tensors cannot be read ({type(exc).__name__}: {exc}); the file may be truncated") from None
    return tensors, record


def require_keys(path, record: dict, tensors: dict, tensor_names=(), meta_keys=()) -> None:
    """Raise ArtifactError naming what a well-formed artifact of this kind lacks."""
    missing = [f"tensor {n!r}" for n in tensor_names if n not in tensors]
    missing += [f"metadata {k!r}" for k in meta_keys if k not in record]
    if missing:
        raise ArtifactError(f"{path} is an incomplete {record.get('kind')} artifact: missing {', '.join(missing)}")


# -- descriptors ---------------------------------------------------------------------------------

def save_descriptor(descriptor, path) -> Path:
    meta = {"grid": descriptor.grid.to_json(), "provenance": descriptor.provenance.to_json()}
    return write_artifact(path, "descriptor", {"matrix": descriptor.matrix}, meta)


def load_descriptor(path):
    from .descriptor import Descriptor, ProbeGrid, Provenance

    tensors, record = read_artifact(path, "descriptor")
    require_keys(path, record, tensors, ("matrix",), ("grid", "provenance"))
    try:
        return Descriptor(tensors["matrix"], ProbeGrid.from_json(record["grid"]), Provenance.from_json(record["provenance"]))
    except (KeyError, TypeError) as exc:
        raise ArtifactError(f"{path}: malformed descriptor metadata ({exc})") from None
