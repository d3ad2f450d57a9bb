"""`platonic inspect` and `platonic convert`: what a platonic file holds, and pickles made safe once."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..errors import InvalidInputError
from .common import console, overwrite_option, print_operators


def inspect(path: Path = typer.Argument(..., help="A descriptor, operator or bank file, or a model platonic exported."),
            as_json: bool = typer.Option(False, "--json", help="Print the metadata record as JSON.")) -> None:
    """Print what a platonic file holds."""
    from ..storage import read_artifact

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


def _export_record(path: Path) -> dict | None:
    """The provenance record of a model platonic exported (open_clip file, transformers directory), else None."""
    from ..models.hf_backend import PROVENANCE_FILE, is_transformers_export
    from ..models.open_clip_backend import is_open_clip_export_directory
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
    from ..finetuning.checkpoints import convert_pickled, is_converted_file
    from ..preflight import check_output, refuse_output_among_inputs

    if not trust_pickle:
        raise PickledCheckpointError(f"converting {checkpoint} unpickles it, which runs code the file names; "
                                     f"add --trust-pickle if you trust it: platonic convert --trust-pickle "
                                     f"{checkpoint} -o {output}")
    if not checkpoint.is_file():
        raise InvalidInputError(f"{checkpoint} does not exist (no such file)")
    refuse_output_among_inputs({"-o": output}, [checkpoint])
    check_output(output, is_converted_file, overwrite, "checkpoint platonic converted")
    from .errors import one_line

    typer.echo(one_line(f"warning: unpickling {checkpoint} runs the code it names, with your permissions; "
                        "continue only if you trust where it came from"), err=True)
    record = convert_pickled(checkpoint, output, trust_pickle=True, overwrite=overwrite)
    console.print(f"wrote {output}: {record['tensors']} tensors from {checkpoint} (sha256 {record['source_sha256'][:16]}…)")
