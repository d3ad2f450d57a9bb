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


def check_compute(device: str | None) -> None:
    """Before any work, without importing torch: a launch that lost its processes (`launch_env`), and a
    --device that is not there (`_checks.check_device`; None and "cpu" are accepted at once)."""
    from .._checks import check_device
    from ..launch_env import refuse_lost_processes

    refuse_lost_processes()
    check_device(device)


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

    if prompts is not None and classes:
        raise InvalidInputError("give the class prompts by --prompts FILE or by --classes (with --template), not both: "
                                "with --prompts, --classes and --template would be ignored")
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


def check_descriptor_files(files: list[Path]) -> None:
    """Refuse a file given twice, a file that is not a descriptor, and two files of one (task, source) (a bank
    keeps one operator per pair), from the files' headers alone: before any work, without torch."""
    from ..preflight import same_path
    from ..storage import read_header

    for i, a in enumerate(files):
        for b in files[:i]:
            if same_path(a, b):
                raise InvalidInputError(f"descriptor file {a} is given twice; give each file once")
    seen = {}
    for f in files:
        record = read_header(f, "descriptor")
        key = ((record.get("grid") or {}).get("task"), (record.get("provenance") or {}).get("source"))
        if key in seen:
            raise InvalidInputError(f"{seen[key]} and {f} both hold task {key[0]!r} from source {key[1]!r}; "
                                    "a bank keeps one operator per (source, task): give one of them")
        seen[key] = f


def read_descriptors(files: list[Path]) -> list:
    """The descriptors of `files` (`check_descriptor_files` first)."""
    from ..descriptor import Descriptor

    check_descriptor_files(files)
    return [Descriptor.load(f).require_plausible_scale() for f in files]


def probe_resize_option():
    """--probe-resize: how a folder of probe images is made canonical (`platonic.models.images`)."""
    return typer.Option("reference", "--probe-resize", help="How --probes folders' images become probes: reference (the "
                        "paper's bundle: shorter side to 256, centre 224 crop; the default) or shorter-side (shorter side "
                        "to 224, then the crop: the path before issue 35, for descriptors measured with it).")


def given_probes(model, paths: list[Path], resize: str = "reference") -> dict:
    """{digest: canonical probes} of the probe files / folders given with --probes, for `model`."""
    from ..data.probe_files import load_probes
    from ..hashing import tensor_digest
    from ..measurement import canonical_probes

    given = {}
    for p in paths:
        canon = canonical_probes(model, load_probes(p, resize=resize))
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
    print_table(table)


def print_table(table: Table) -> None:
    """Print a table whole: piped or redirected, rich would fit it to 80 columns and cut its cells (the
    source of `+1*task@source` lost); on a terminal it fits the terminal."""
    if console.is_terminal:
        console.print(table)
        return
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    Console(soft_wrap=True, width=max(console.width, natural)).print(table)
