"""`platonic inspect` and `platonic convert`: what a platonic file holds, and pickles made safe once."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..errors import InvalidInputError
from .common import console, overwrite_option, print_operators


def inspect(path: Path = typer.Argument(..., help="A descriptor, operator or bank file, or a model platonic exported."),
            as_json: bool = typer.Option(False, "--json", help="Print the metadata record as JSON.")) -> None:
    """Print what a platonic file holds: a descriptor, operator or bank, a model platonic exported, a fine-tune
    directory (platonic finetune) or an adapter directory (apply --route adapter)."""
    from ..storage import read_artifact

    if _print_directory(path, as_json):
        return
    export = _export_record(path)
    if export is not None:
        if as_json:
            print(json.dumps(export, indent=2, sort_keys=True))
            return
        console.print(f"[bold]{path}[/]: a model exported by platonic {export.get('platonic_version', '?')} from {export.get('spec')}")
        for edit in export.get("edits", []):
            terms = " ".join(f"{t['coefficient']:+g}*{t['task']}@{t['source']}" for t in edit.get("terms", []))
            strength = f" at alpha = {edit['alpha']:g}" if "alpha" in edit else ""
            console.print(f"  edit      {edit.get('route', '?')}: {terms}{strength}")
        return
    tensors, record = read_artifact(path)
    _validate_artifact(path, record["kind"])
    if as_json:
        print(json.dumps(record, indent=2, sort_keys=True))
        return
    console.print(f"[bold]{path}[/]: platonic {record['kind']} (format version {record['format_version']})")
    if record["kind"] == "descriptor":
        grid, prov = record["grid"], record["provenance"]
        m = tensors["matrix"]
        console.print(f"  task      {grid['task']}\n  shape     {tuple(m.shape)} (N probes x M prompts), {m.dtype}")
        console.print(f"  norm      {float(m.double().norm()):.6g}\n  probes    sha256 {grid['probe_digest']}")
        console.print(f"  prompts   {grid['prompts'][:3]}{' …' if len(grid['prompts']) > 3 else ''}")
        console.print(f"  source    {prov['source']}\n  finetune  {prov['finetune']}\n  created   {prov['created']} by platonic {prov['library_version']}")
    elif record["kind"] == "operator":
        print_operators([record], [tensors["delta"]], title=f"operator for target {record['target']}")
    elif record["kind"] == "bank":
        console.print(f"  target    {record['target']}\n  entries   {len(record['entries'])}")
        print_operators(record["entries"], [tensors[f"entry.{i}"] for i in range(len(record["entries"]))],
                        title="bank entries")


def _print_directory(path: Path, as_json: bool) -> bool:
    """Print a fine-tune or adapter directory's record (True), refuse another directory that is not an export,
    naming what it holds; False for anything else."""
    from ..layouts import (
        ADAPTER_WEIGHTS,
        FINETUNE_RECORD,
        is_adapter_directory,
        is_finetune_directory,
        is_model_export,
        output_kind,
        read_json,
    )
    from ..storage import file_metadata

    if not path.is_dir() or is_model_export(path):
        return False
    if is_finetune_directory(path):
        record = read_json(path / FINETUNE_RECORD)
        if not as_json:
            data, losses = record.get("data", {}), record.get("losses") or [float("nan")]
            console.print(f"[bold]{path}[/]: a {record.get('mode')} fine-tune of {record.get('model')} by platonic "
                          f"{record.get('platonic_version', '?')}\n  task      {data.get('task')} ({data.get('source')}, "
                          f"split {data.get('split')})\n  steps     {len(record.get('losses', []))}, loss "
                          f"{losses[0]:.4g} -> {losses[-1]:.4g}\n  weights   {record.get('weights')}")
    elif is_adapter_directory(path):
        record = json.loads(file_metadata(path / ADAPTER_WEIGHTS)["platonic"])
        if not as_json:
            terms = " ".join(f"{t['coefficient']:+g}*{t['task']}@{t['source']}" for t in record.get("terms", []))
            console.print(f"[bold]{path}[/]: a peft adapter platonic fitted on {record.get('target_spec')} for {terms} "
                          f"({record.get('report', {}).get('steps')} steps)")
    else:
        kind = output_kind(path)
        raise InvalidInputError(f"{path} is {kind or 'a directory that holds no platonic file'}; `platonic inspect` "
                                "reads descriptor, operator and bank files, exported models, fine-tune and adapter "
                                "directories")
    if as_json:
        print(json.dumps(record, indent=2, sort_keys=True))
    return True


def _export_record(path: Path) -> dict | None:
    """The provenance record of a model platonic exported (open_clip file, transformers directory), else None."""
    from ..layouts import PROVENANCE_FILE, is_open_clip_export_directory, is_transformers_export
    from ..storage import platonic_record

    if path.is_dir():
        exported = is_transformers_export(path) or is_open_clip_export_directory(path)
        return json.loads((path / PROVENANCE_FILE).read_text()) if exported else None
    for key in ("platonic", "platonic_world"):
        record = platonic_record(path, key) if path.is_file() else None
        if record is not None and "format" not in record:
            return record.get("provenance", record) if key == "platonic_world" else record
    return None


def _validate_artifact(path: Path, kind: str) -> None:
    """Load the artifact with its kind's reader, which names what a malformed one lacks."""
    from ..bank import Operator, OperatorBank
    from ..descriptor import Descriptor
    from ..errors import ArtifactError

    readers = {"descriptor": Descriptor.load, "operator": Operator.load, "bank": OperatorBank.load}
    if kind not in readers:
        raise ArtifactError(f"{path} holds a platonic {kind!r}, which this platonic does not know; upgrade platonic")
    readers[kind](path)


def convert(
    checkpoint: Path = typer.Argument(..., help="A pickled checkpoint (.pt / .bin / .pth: a whole pickled module or a "
                                      "pickled dict) that platonic refuses to load."),
    output: Path = typer.Option(..., "-o", "--output", help="The safetensors file to write (*.safetensors)."),
    trust_pickle: bool = typer.Option(False, "--trust-pickle", help="Unpickle the file, which RUNS CODE the file names: "
                                      "only for a file you trust. Required."),
    overwrite: bool = overwrite_option(),
) -> None:
    """Convert a pickled checkpoint into a safetensors state dict that every platonic command reads.

    Unpickling runs whatever code the file names, so nothing happens without --trust-pickle; with it,
    a warning is printed first. The classes a pickled module names must be importable (e.g. the
    open_clip version that saved it). The output is written atomically.
    """
    from ..errors import PickledCheckpointError
    from ..preflight import check_output, refuse_output_among_inputs

    if not trust_pickle:
        raise PickledCheckpointError(f"converting {checkpoint} unpickles it, which runs code the file names; "
                                     f"add --trust-pickle if you trust it: platonic convert --trust-pickle "
                                     f"{checkpoint} -o {output}")
    if not checkpoint.is_file():
        raise InvalidInputError(f"{checkpoint} does not exist (no such file)")
    refuse_output_among_inputs({"-o": output}, [checkpoint])
    from ..finetuning.checkpoints import convert_pickled, is_converted_file

    check_output(output, is_converted_file, overwrite, "checkpoint platonic converted")
    from .errors import one_line

    typer.echo(one_line(f"warning: unpickling {checkpoint} runs the code it names, with your permissions; "
                        "continue only if you trust where it came from"), err=True)
    record = convert_pickled(checkpoint, output, trust_pickle=True, overwrite=overwrite)
    console.print(f"wrote {output}: {record['tensors']} tensors from {checkpoint} (sha256 {record['source_sha256'][:16]}…)")


def clean(
    paths: list[Path] = typer.Argument(None, help="Outputs, or folders of outputs, to clean beside (default: the "
                                       "working directory)."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Also every folder of the cache ($PLATONIC_CACHE)."),
) -> None:
    """Remove what killed platonic writes left: hidden .NAME.PID.platonic-*.tmp beside an output (half
    written) once process PID is gone, a previous directory moved aside (.old: put back where the output
    is missing), and an adapter parked by an interrupted `apply --route adapter` (.new: put in place when
    its export names it, else deleted). Every write does the same beside its own output; this does it
    for the folders named, and the cache's."""
    import os

    from ..paths import cache_root
    from ..storage import clean_stale_temporaries, sweep_stale_temporaries

    found = []
    for path in paths or [Path(".")]:
        found += clean_stale_temporaries(path) if path.name else []
        found += sweep_stale_temporaries(path if path.is_dir() else path.parent)
    if cache and cache_root().is_dir():
        for folder, _, _ in os.walk(cache_root()):
            found += sweep_stale_temporaries(folder)
    for entry in found:
        console.print(f"cleaned {entry}")
    console.print(f"{len(found)} stale temporar{'y' if len(found) == 1 else 'ies'} of killed writes cleaned")
