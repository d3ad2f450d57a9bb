"""What the command modules share: the console, options typed once, and reading the inputs users name.

Nothing here loads a model or runs the engine; heavy modules are imported inside the functions.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ..errors import InvalidInputError

console = Console(soft_wrap=True)  # a message is never broken at 80 columns (paths stay whole when piped)


def overwrite_option():
    return typer.Option(False, "--overwrite", help="Replace an existing output that is not a previous platonic output "
                        "of this kind (it is swapped out atomically).")


def device_option():
    return typer.Option(None, "--device", help="torch device, e.g. cpu, cuda or cuda:1 (default: cuda when a GPU is "
                        "present, else cpu). In a launch of N processes (accelerate launch --multi_gpu --num_processes "
                        "N -m platonic.cli ...) process k takes cuda:k.")


def dtype_option():
    return typer.Option(None, "--dtype", help="float32 (default), bfloat16 or float16: the forward passes run under "
                        "autocast in that dtype (weights stay float32; the solve runs in float64).")


def batch_size_option(what: str = "inputs per forward pass when encoding (default 64)"):
    return typer.Option(None, "--batch-size", min=1, help=what)


def num_workers_option():
    return typer.Option(0, "--num-workers", min=0, help="DataLoader worker processes that decode a lazily read split "
                        "ahead of the model (0: decode in the main process).")


def use_compute(ctx: typer.Context, device: str | None, dtype: str | None, batch_size: int | None = None,
                num_workers: int | None = 0):
    """Check the compute options (one-line errors), join the launch's processes if there are several, and make
    the settings active until the command ends; the non-main processes of a launch print nothing."""
    from ..compute import Compute, using
    from ..distributed import join, process_device

    settings = Compute.parse(device, dtype, batch_size, num_workers)
    group = join(settings.torch_device())
    settings = settings.model_copy(update={"device": process_device(str(settings.torch_device()))})
    console.quiet = not group.is_main
    ctx.with_resource(using(settings))
    return settings


def read_prompts(prompts: Path | None, classes: str | None, template: str) -> list[str]:
    """The class prompts: a UTF-8 file (one per line), or --classes filled into --template's single `{}`."""
    from ..prompts import class_prompts, read_prompt_file

    if prompts is not None:
        return read_prompt_file(prompts)
    if classes:
        made = class_prompts(template, classes.split(","))
        if not made:
            raise InvalidInputError("--classes names no class; give e.g. --classes cat,dog")
        return made
    raise InvalidInputError("give the class prompts: --prompts FILE (one per line) or --classes a,b,c [--template ...]")


def input_paths(*items) -> list[Path]:
    """Local paths among command inputs: files, folders, and the files model specs read."""
    from ..models import spec_files

    out = []
    for item in items:
        if item is None:
            continue
        if isinstance(item, Path):
            out.append(item)
        elif isinstance(item, str):
            out += spec_files(item) or ([Path(item)] if Path(item).exists() else [])
    return out


def read_descriptors(files: list[Path]) -> list:
    """Descriptor files, each once; two files with the same (task, source) are refused."""
    from ..descriptor import Descriptor
    from ..preflight import same_path

    for i, a in enumerate(files):
        for b in files[:i]:
            if same_path(a, b):
                raise InvalidInputError(f"descriptor file {a} is given twice; give each file once")
    descriptors, seen = [], {}
    for f in files:
        d = Descriptor.load(f)
        key = (d.task, d.provenance.source)
        if key in seen:
            raise InvalidInputError(f"{seen[key]} and {f} both hold task {d.task!r} from source {d.provenance.source!r}; "
                                    "a bank keeps one operator per (source, task): give one of them")
        seen[key] = f
        descriptors.append(d)
    return descriptors


def given_probes(model, paths: list[Path]) -> dict:
    """{digest: canonical probes} of the probe files / folders given with --probes, for `model`."""
    from ..data.probe_files import load_probes
    from ..hashing import tensor_digest
    from ..measurement import canonical_probes

    given = {}
    for p in paths:
        canon = canonical_probes(model, load_probes(p))
        given[tensor_digest(canon)] = canon
    return given


def print_operators(metas, deltas, title: str) -> None:
    table = Table(title=title)
    for col in ("terms", "form", "shape", "norm", "residual", "mu_a", "mu_b", "solve"):
        table.add_column(col)
    for meta, delta in zip(metas, deltas):
        terms = " ".join(f"{t['coefficient']:+g}*{t['task']}@{t['source']}" for t in meta["terms"])
        fmt = lambda v: "-" if v is None else f"{v:.4g}"  # noqa: E731
        record = meta.get("solve") or {}
        kind = record.get("kind", "-") + (f" w={record['anchor_weight']:g}" if record.get("anchor_weight") else "")
        table.add_row(terms, meta["form"], str(tuple(delta.shape)), f"{float(delta.double().norm()):.4g}",
                      fmt(meta.get("residual")), fmt(meta.get("mu_a")), fmt(meta.get("mu_b")), kind)
    console.print(table)
