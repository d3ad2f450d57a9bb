"""What platonic's outputs look like on disk, and which kind of output a path holds, read cheaply.

A command decides before any work whether it may replace an existing output (only a previous output
of the same kind, unless --overwrite) and whether an input is what it claims. These predicates read
file names, small JSON records and safetensors headers only, never tensors and never torch, so that
a refusal costs milliseconds. The modules that write each kind re-export its predicate
(`platonic.adapter.is_adapter_directory`, `platonic.transfer.is_model_export`, ...).

    adapter directory        adapter_config.json + adapter_model.safetensors with platonic metadata (peft's layout)
    transformers export      config.json + platonic_provenance.json naming the spec
    open_clip export         a directory with open_clip_config.json + platonic_provenance.json naming the
                             architecture, or a FILE.safetensors whose metadata names it
    fine-tune directory      finetune.json of kind "finetune" (platonic finetune)
    experiment run           results.json of schema "platonic.results" (platonic experiment / demo)
    recipe run               results.json of schema "platonic.recipe_run" (platonic run)
"""

from __future__ import annotations

import json
from pathlib import Path

from .storage import EXPORT_RECORD_FILE, FORMAT_NAME, file_metadata, platonic_record

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
PROVENANCE_FILE = EXPORT_RECORD_FILE  # platonic_provenance.json, in transformers and open_clip export directories
OPEN_CLIP_CONFIG = "open_clip_config.json"  # open_clip.constants.HF_CONFIG_NAME
OPEN_CLIP_WEIGHTS = "open_clip_model.safetensors"  # open_clip.constants.HF_SAFE_WEIGHTS_NAME
FINETUNE_RECORD = "finetune.json"
FINETUNE_KIND = "finetune"
RESULTS_FILE = "results.json"
EXPERIMENT_SCHEMA = "platonic.results"
RECIPE_SCHEMA = "platonic.recipe_run"


def read_json(path) -> dict | None:
    """The JSON object in file `path`, or None (missing, unreadable, not JSON, not an object)."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def is_adapter_directory(path) -> bool:
    """True for a directory written by `platonic.Adapter.save` (peft files with platonic metadata)."""
    path = Path(path)
    weights = path / ADAPTER_WEIGHTS
    if not ((path / ADAPTER_CONFIG).is_file() and weights.is_file()):
        return False
    try:
        return FORMAT_NAME in file_metadata(weights)
    except Exception:  # noqa: BLE001 - a damaged file is not an adapter platonic wrote
        return False


def is_transformers_export(path) -> bool:
    """True for a directory written by `HFEncoder.save` (config.json and platonic_provenance.json)."""
    path = Path(path)
    record = read_json(path / PROVENANCE_FILE) if (path / "config.json").is_file() else None
    return record is not None and "spec" in record


def is_open_clip_export_directory(path) -> bool:
    """True for a directory written by `OpenClipEncoder.save_directory`."""
    path = Path(path)
    record = read_json(path / PROVENANCE_FILE) if (path / OPEN_CLIP_CONFIG).is_file() else None
    return record is not None and "arch" in record


def is_open_clip_export(path) -> bool:
    """True for a safetensors file written by `OpenClipEncoder.save` (platonic metadata naming the architecture)."""
    record = platonic_record(path) if Path(path).is_file() else None
    return bool(record) and "arch" in record and record.get("format") != FORMAT_NAME


def is_model_export(path) -> bool:
    """True for a model platonic exported: a safetensors file with platonic metadata that records edits,
    or a transformers / open_clip directory with platonic_provenance.json."""
    path = Path(path)
    if path.is_dir():
        return is_transformers_export(path) or is_open_clip_export_directory(path)
    return any(record is not None and "format" not in record for record in
               (platonic_record(path), platonic_record(path, "platonic_world")))


def is_finetune_directory(path) -> bool:
    """True for a directory written by `platonic finetune` (its finetune.json says kind "finetune")."""
    record = read_json(Path(path) / FINETUNE_RECORD)
    return record is not None and record.get("kind") == FINETUNE_KIND


def is_run_directory(path) -> bool:
    """True for a directory holding the results.json of a `platonic experiment` or `platonic demo` run."""
    record = read_json(Path(path) / RESULTS_FILE)
    return record is not None and record.get("schema") == EXPERIMENT_SCHEMA


def is_recipe_run(path) -> bool:
    """True for a directory a `platonic run` wrote (its results.json names the recipe run's schema)."""
    record = read_json(Path(path) / RESULTS_FILE)
    return record is not None and record.get("schema") == RECIPE_SCHEMA


KINDS = (
    (is_adapter_directory, "a peft adapter directory platonic wrote (apply --route adapter)"),
    (is_finetune_directory, "a fine-tune directory (platonic finetune)"),
    (is_model_export, "a model platonic exported"),
    (is_run_directory, "an experiment run directory (platonic experiment)"),
    (is_recipe_run, "a recipe run directory (platonic run)"),
)


def output_kind(path) -> str | None:
    """What platonic output `path` holds, in words (for messages that name the real thing), or None."""
    return next((words for predicate, words in KINDS if predicate(path)), None)
