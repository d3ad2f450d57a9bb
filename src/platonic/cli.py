"""The `platonic` command line (typer)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ._version import __version__
from .cli_errors import OneLineErrors
from .cli_errors import fail as _fail
from .errors import InvalidInputError, PlatonicError, ZeroDescriptorWarning
from .terms import default_alpha, parse_terms  # noqa: F401 - re-exported (platonic.cli.parse_terms)

app = typer.Typer(
    help="Move fine-tuned skills between different multimodal dual encoders (Platonic Task Arithmetic).",
    no_args_is_help=True,
    add_completion=False,
    cls=OneLineErrors,  # every error: one line `error: ...` on stderr, exit code 2
    rich_markup_mode=None,  # help texts are plain: FOLDER[/test] is a path, not markup
)
console = Console(soft_wrap=True)  # a message is never broken at 80 columns (paths stay whole when piped)

from .cli_world import world_app  # noqa: E402 - typer sub-app; imports nothing heavy

app.add_typer(world_app, name="world")


def _overwrite_option():
    return typer.Option(False, "--overwrite", help="Replace an existing output that is not a previous platonic output "
                        "of this kind (it is swapped out atomically).")


def _version(value: bool) -> None:
    if value:
        console.print(f"platonic {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    """platonic: universal task descriptors, closed-form operators, operator banks."""


@app.command()
def inspect(path: Path = typer.Argument(..., help="A descriptor, operator or bank file, or a model platonic exported."),
            as_json: bool = typer.Option(False, "--json", help="Print the metadata record as JSON.")) -> None:
    """Print what a platonic file holds."""
    from .storage import read_artifact

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
        _print_operators([record], [tensors["delta"]], title=f"operator for target {record['target']}")
    elif record["kind"] == "bank":
        console.print(f"  target    {record['target']}\n  entries   {len(record['entries'])}")
        _print_operators(record["entries"], [tensors[f"entry.{i}"] for i in range(len(record["entries"]))],
                         title="bank entries")


def _export_record(path: Path) -> dict | None:
    """The provenance record of a model platonic exported (open_clip file, transformers directory), else None."""
    from .models.hf_backend import PROVENANCE_FILE, is_transformers_export
    from .models.open_clip_backend import is_open_clip_export_directory
    from .storage import platonic_record

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
    from .bank import Operator, OperatorBank
    from .descriptor import Descriptor
    from .errors import ArtifactError

    readers = {"descriptor": Descriptor.load, "operator": Operator.load, "bank": OperatorBank.load}
    if kind not in readers:
        raise ArtifactError(f"{path} holds a platonic {kind!r}, which this platonic does not know; upgrade platonic")
    readers[kind](path)


def _print_operators(metas, deltas, title: str) -> None:
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


def _device_option():
    return typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda:0.")


def load_probes(path: Path, option: str = "--probes"):
    """A folder of images or of sound files (made canonical: `models.images`, `models.audio`) or a
    .safetensors file holding a tensor named 'probes' (`option` names the flag in errors)."""
    from safetensors.torch import load_file

    from .errors import ArtifactError
    from .models.audio import canonical_audio, is_audio_file
    from .models.images import canonical_images

    if path.is_dir():
        if any(is_audio_file(p) for p in path.rglob("*")):
            return canonical_audio(path)
        return canonical_images(path)
    if path.is_file() and path.suffix == ".safetensors":
        try:
            tensors = load_file(str(path))
        except Exception as exc:  # noqa: BLE001 - safetensors raises several types for damaged files
            raise ArtifactError(f"{option} {path} is not a readable safetensors file ({type(exc).__name__}); "
                                "it may be truncated") from None
        if "probes" not in tensors:
            raise InvalidInputError(f"{path} holds no tensor named 'probes' (it has: {', '.join(tensors) or 'none'})")
        return tensors["probes"]
    if not path.exists():
        raise InvalidInputError(f"{option} {path} does not exist; give a folder of images or sound files, or a "
                                ".safetensors file")
    raise InvalidInputError(f"{option} {path}: give a folder of images or sound files, or a .safetensors file with a "
                            "'probes' tensor")


def read_prompts(prompts: Path | None, classes: str | None, template: str) -> list[str]:
    """The class prompts: a UTF-8 file (one per line), or --classes filled into --template's single `{}`."""
    from .prompts import class_prompts, read_prompt_file

    if prompts is not None:
        return read_prompt_file(prompts)
    if classes:
        made = class_prompts(template, classes.split(","))
        if not made:
            raise InvalidInputError("--classes names no class; give e.g. --classes cat,dog")
        return made
    raise InvalidInputError("give the class prompts: --prompts FILE (one per line) or --classes a,b,c [--template ...]")


def _input_paths(*items) -> list[Path]:
    """Local paths among command inputs: files, folders, and the files model specs read."""
    from .models import spec_files

    out = []
    for item in items:
        if item is None:
            continue
        if isinstance(item, Path):
            out.append(item)
        elif isinstance(item, str):
            out += spec_files(item) or ([Path(item)] if Path(item).exists() else [])
    return out


def _read_descriptors(files: list[Path]) -> list:
    """Descriptor files, each once; two files with the same (task, source) are refused."""
    from .descriptor import Descriptor
    from .preflight import same_path

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


@app.command()
def measure(
    model: str = typer.Option(..., "--model", help="The pre-trained model spec, e.g. open_clip:ViT-B-32/laion2b_s34b_b79k."),
    finetuned: str = typer.Option(..., "--finetuned", help="Fine-tune: a state dict (.safetensors; open_clip's .bin / "
                                  ".pt / .pth), a peft LoRA adapter dir, a transformers vision-only save_pretrained dir "
                                  "(CLIPVisionModel, SiglipVisionModel), hf:ORG/NAME[@REV], or a model spec."),
    task: str = typer.Option(..., "--task", help="Task name stored in the descriptor."),
    probes: Path = typer.Option(..., "--probes", help="Folder of probe images, or .safetensors with a 'probes' tensor."),
    prompts: Path = typer.Option(None, "--prompts", help="UTF-8 text file, one class prompt per line."),
    classes: str = typer.Option(None, "--classes", help="Comma-separated class names (with --template)."),
    template: str = typer.Option("a photo of a {}.", "--template", help="Prompt template for --classes, with one {}."),
    output: Path = typer.Option(..., "-o", "--output", help="Descriptor file to write."),
    device: str = _device_option(),
    batch_size: int = typer.Option(64, "--batch-size", min=1),
    require_pinned: bool = typer.Option(False, "--require-pinned", help="Refuse a hub fine-tune that names no commit "
                                        "(write hf:ORG/NAME@COMMIT)."),
    overwrite: bool = _overwrite_option(),
) -> None:
    """Measure the universal task descriptor of a fine-tune (N probes x M prompts).

    The descriptor's provenance records the fine-tune as loaded: its revision and how many tensors.
    """
    from ._checks import as_device
    from .measurement import measure as measure_descriptor
    from .finetuned import require_pinned as refuse_unpinned
    from .measurement import require_finetune_exists
    from .models import check_spec
    from .preflight import check_cache_writable, check_output, refuse_output_among_inputs
    from .storage import artifact_kind

    try:
        as_device(device)
        check_spec(model)
        texts = read_prompts(prompts, classes, template)
        require_finetune_exists(finetuned)
        if require_pinned:
            refuse_unpinned(finetuned, "--finetuned")
        refuse_output_among_inputs({"-o": output}, _input_paths(model, finetuned, probes, prompts))
        check_output(output, lambda p: artifact_kind(p) == "descriptor", overwrite, "platonic descriptor file")
        check_cache_writable()
        canon = load_probes(probes)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ZeroDescriptorWarning)  # refused below, as an error
            desc = measure_descriptor(model, finetuned, canon, texts, task, batch_size=batch_size, device=device,
                                      require_pinned=require_pinned)
        if desc.norm() == 0:
            raise InvalidInputError(f"the fine-tune {finetuned} changed nothing on these probes: the descriptor is all "
                                    f"zeros, so an operator solved from it would be no edit; nothing was written. Check "
                                    "that --finetuned is the fine-tuned model and not the pre-trained one")
        desc.save(output, overwrite=overwrite)
    except PlatonicError as exc:
        _fail(exc)
    console.print(f"wrote {output}: {desc!r}")


@app.command()
def convert(
    checkpoint: Path = typer.Argument(..., help="A pickled checkpoint (.pt / .bin / .pth: a whole pickled module or a "
                                      "pickled dict) that platonic refuses to load."),
    output: Path = typer.Option(..., "-o", "--output", help="The safetensors file to write (*.safetensors)."),
    trust_pickle: bool = typer.Option(False, "--trust-pickle", help="Unpickle the file, which RUNS CODE the file names: "
                                      "only for a file you trust. Required."),
    overwrite: bool = _overwrite_option(),
) -> None:
    """Convert a pickled checkpoint into a safetensors state dict that every platonic command reads.

    Unpickling runs whatever code the file names, so nothing happens without --trust-pickle; with it,
    a warning is printed first. The classes a pickled module names must be importable (e.g. the
    open_clip version that saved it). The output is written atomically.
    """
    from .checkpoints import convert_pickled, is_converted_file
    from .errors import PickledCheckpointError
    from .preflight import check_output, refuse_output_among_inputs

    try:
        if not trust_pickle:
            raise PickledCheckpointError(f"converting {checkpoint} unpickles it, which runs code the file names; "
                                         f"add --trust-pickle if you trust it: platonic convert --trust-pickle "
                                         f"{checkpoint} -o {output}")
        if not checkpoint.is_file():
            raise InvalidInputError(f"{checkpoint} does not exist (no such file)")
        refuse_output_among_inputs({"-o": output}, [checkpoint])
        check_output(output, is_converted_file, overwrite, "checkpoint platonic converted")
        from .cli_errors import one_line

        typer.echo(one_line(f"warning: unpickling {checkpoint} runs the code it names, with your permissions; "
                            "continue only if you trust where it came from"), err=True)
        record = convert_pickled(checkpoint, output, trust_pickle=True, overwrite=overwrite)
    except PlatonicError as exc:
        _fail(exc)
    console.print(f"wrote {output}: {record['tensors']} tensors from {checkpoint} (sha256 {record['source_sha256'][:16]}…)")


@app.command()
def finetune(
    model: str = typer.Argument(..., help="The pre-trained model spec, e.g. open_clip:ViT-B-32/laion2b_s34b_b79k."),
    task: str = typer.Option(..., "--task", help="NAME (a registered task: eurosat, dtd, ...) or NAME=SOURCE: an image "
                             "folder (a sound folder for audio-text models), hf:ORG/NAME[@REV], hf:DIR or "
                             "torchvision:NAME@ROOT (docs/data.md)."),
    output: Path = typer.Option(..., "-o", "--output", help="Directory to write: a peft adapter (lora) or "
                                "model.safetensors (full, attention), with finetune.json."),
    mode: str = typer.Option("lora", "--mode", help="lora, full or attention (ATT-FT: attention weights only)."),
    orthoreg: float = typer.Option(0.0, "--orthoreg", help="OrthoReg's lambda (method.md §2); 0: off."),
    template: str = typer.Option(None, "--template", help="Prompt template with one {} (default: the registry's, "
                                 "else 'a photo of a {}.', for sound 'this is a sound of {}.')."),
    steps: int = typer.Option(None, "--steps", min=1, help="Optimiser steps (default 200)."),
    epochs: float = typer.Option(None, "--epochs", help="Passes over the train split instead of --steps "
                                 "(the paper's sources: 3; SUN397: 1)."),
    batch_size: int = typer.Option(64, "--batch-size", min=1),
    lr: float = typer.Option(1e-4, "--lr", help="AdamW learning rate."),
    schedule: str = typer.Option("cosine", "--schedule", help="cosine (decay to 0) or constant (the paper's "
                                 "sources), after the warm-up."),
    weight_decay: float = typer.Option(0.1, "--weight-decay"),
    lora_rank: int = typer.Option(4, "--lora-rank", min=1, help="LoRA rank (the paper's sources: 4)."),
    lora_alpha: float = typer.Option(8.0, "--lora-alpha", help="LoRA alpha (the paper's sources: 8)."),
    lora_targets: str = typer.Option("model", "--lora-targets", help="model (the backend's q / v projections) or "
                                     "attention (q, k, v and out: LoRA-ATT)."),
    seed: int = typer.Option(0, "--seed"),
    device: str = _device_option(),
    overwrite: bool = _overwrite_option(),
) -> None:
    """Fine-tune a model's image (or audio) tower on a task against its frozen prompt head, and write it as a source.

    The directory is read wherever a fine-tune is (platonic measure --finetuned DIR, a YAML's sources).
    """
    from pydantic import ValidationError

    from ._checks import as_device, as_finite_scalar
    from .data.resolve import open_task
    from .finetune import FinetuneConfig
    from .finetune_output import MODES, finetune_on_task, is_finetune_directory
    from .models import check_spec, load_model
    from .preflight import check_cache_writable, check_output, refuse_output_among_inputs

    try:
        if mode not in MODES:
            raise InvalidInputError(f"--mode {mode!r}: choose lora, full or attention")
        if lora_targets not in ("model", "attention"):
            raise InvalidInputError(f"--lora-targets {lora_targets!r}: choose model or attention")
        as_device(device)
        check_spec(model)
        name, eq, source = task.partition("=")
        if eq and not (name and source):
            raise InvalidInputError(f"--task {task!r}: write NAME or NAME=SOURCE")
        data = open_task(name, source or None, template=template)
        try:
            length = {k: v for k, v in (("steps", steps), ("epochs", epochs)) if v is not None}
            config = FinetuneConfig(mode=mode, **length, batch_size=batch_size, lr=as_finite_scalar("--lr", lr),
                                    schedule=schedule, weight_decay=weight_decay,
                                    orthoreg=as_finite_scalar("--orthoreg", orthoreg), lora_rank=lora_rank,
                                    lora_alpha=lora_alpha, lora_targets=lora_targets, seed=seed)
        except ValidationError as exc:
            raise InvalidInputError("; ".join(f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}"
                                              for e in exc.errors())) from None
        refuse_output_among_inputs({"-o": output}, _input_paths(model, source or None))
        check_output(output, is_finetune_directory, overwrite, "platonic fine-tune directory", directory=True)
        check_cache_writable()
        pre = load_model(model, device=device)
        _, record = finetune_on_task(pre, data, config, output, overwrite=overwrite)
    except PlatonicError as exc:
        _fail(exc)
    losses = record["losses"]
    used = record["data"]
    count = f"{used['clips']} train clips" if "clips" in used else f"{used['images']} train images"
    console.print(f"wrote {output}: {mode} fine-tune of {model} on {used['task']} "
                  f"({count}, {len(losses)} steps, loss {losses[0]:.4g} -> {losses[-1]:.4g})")


@app.command()
def solve(
    descriptors: list[Path] = typer.Argument(..., help="Descriptor files."),
    target: str = typer.Option(..., "--target", help="Target model spec."),
    output: Path = typer.Option(..., "-o", "--output", help="Bank file to write."),
    probes: list[Path] = typer.Option([], "--probes", help="Probe files/folders, if not in the probe store."),
    mu_a: float = typer.Option(1e-2, "--mu-a", help="Relative ridge weight on the probe side."),
    mu_b: float = typer.Option(1e-6, "--mu-b", help="Relative ridge weight on the prompt side."),
    solve_kind: str = typer.Option("paper", "--solve", help="paper (method §1.2) or anchored: also keep the "
                                   "affinities of a pool of unlabeled images unchanged (needs --anchor-images)."),
    anchor_images: Path = typer.Option(None, "--anchor-images", help="The anchored solve's pool: a folder of "
                                       "unlabeled images, or .safetensors with a 'probes' tensor."),
    anchor_weight: float = typer.Option(1.0, "--anchor-weight", help="Relative weight of the pool (1: as much as "
                                        "the probes; lambda = w ||F||^2 / ||F_pool||^2)."),
    device: str = _device_option(),
    overwrite: bool = _overwrite_option(),
) -> None:
    """Solve descriptors into an operator bank for a target model (any architecture)."""
    from ._checks import as_device
    from .hashing import tensor_digest
    from .measurement import canonical_probes
    from .models import check_spec, load_model
    from .preflight import check_cache_writable, check_output, refuse_output_among_inputs
    from .storage import artifact_kind
    from .transfer import check_solve_kind, solve_bank

    try:
        as_device(device)
        check_spec(target)
        check_solve_kind(solve_kind, anchor_images is not None, anchor_weight)
        refuse_output_among_inputs({"-o": output}, _input_paths(target, *descriptors, *probes, anchor_images))
        check_output(output, lambda p: artifact_kind(p) == "bank", overwrite, "platonic bank file")
        check_cache_writable()
        loaded = _read_descriptors(list(descriptors))
        pool = None if anchor_images is None else load_probes(anchor_images, "--anchor-images")
        model = load_model(target, device=device)
        given = {}
        for p in probes:
            canon = canonical_probes(model, load_probes(p))
            given[tensor_digest(canon)] = canon
        bank = solve_bank(model, loaded, probes=given, mu_a=mu_a, mu_b=mu_b, solve=solve_kind, anchor_images=pool,
                          anchor_weight=anchor_weight)
        bank.save(output, overwrite=overwrite)
    except PlatonicError as exc:
        _fail(exc)
    console.print(f"wrote {output}: {bank!r}")
    _print_operators([op._meta() for op in bank], [op.delta for op in bank], title="solved operators")


ROUTES = ("closed_form", "adapter")


def _adapter_dir_beside(output: Path) -> Path:
    return output.with_name(output.name.removesuffix(".safetensors") + ".adapter")


def _exports_directory(target: str, output: Path | None = None) -> bool:
    """Whether the export of `target` to `output` is a directory: transformers always, open_clip unless
    the output is named *.safetensors (a state-dict file)."""
    from .models import has_backend_prefix

    if target.startswith("open_clip:"):
        return output is not None and output.suffix != ".safetensors"
    return target.startswith("hf:") or (not has_backend_prefix(target) and Path(target).is_dir())


def _check_export_output(target: str, output: Path, overwrite: bool) -> None:
    from .models.hf_backend import is_transformers_export
    from .models.open_clip_backend import is_open_clip_export_directory
    from .preflight import check_output
    from .transfer import is_model_export

    if target.startswith("open_clip:") and output.suffix in (".pt", ".pth", ".bin", ".ckpt"):
        raise InvalidInputError(f"-o {output}: an open_clip export is a directory (open_clip's hub layout) or a state "
                                f"dict *.safetensors; name it {output.with_suffix('.safetensors').name} or drop {output.suffix}")
    if _exports_directory(target, output):
        if target.startswith("open_clip:"):
            check_output(output, is_open_clip_export_directory, overwrite, "platonic open_clip export directory",
                         directory=True)
        else:
            check_output(output, is_transformers_export, overwrite, "platonic transformers export", directory=True)
    else:
        check_output(output, lambda p: p.is_file() and is_model_export(p), overwrite, "platonic model export (a file)")


@app.command()
def apply(
    extra: list[Path] = typer.Argument(None, help="More descriptor files (adapter route), e.g. after --descriptors A.utd."),
    target: str = typer.Option(..., "--target", help="Target model spec (the bank's target)."),
    terms: str = typer.Option(..., "--terms", help="Signed composition, e.g. 'eurosat:+1,dtd:-1' (task or task@source), "
                              "each task once."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the edited model in its own format: a "
                                "transformers save_pretrained directory; for open_clip a directory in open_clip's hub "
                                "layout (loads as 'local-dir:DIR') or a state dict FILE.safetensors."),
    route: str = typer.Option("closed_form", "--route", help="closed_form (fold bank operators into the last layer) or "
                              "adapter (fit a LoRA on the tower to the descriptors)."),
    bank: Path = typer.Option(None, "--bank", help="Operator bank file (closed form)."),
    descriptors: list[Path] = typer.Option([], "--descriptors", help="Descriptor files (adapter route)."),
    probes: list[Path] = typer.Option([], "--probes", help="Probe files/folders, if not in the probe store (adapter route)."),
    alpha: float = typer.Option(None, "--alpha", help="Closed-form strength; default 0.5, or 1.0 when every term is "
                                "negative (the paper's negation)."),
    adapter_dir: Path = typer.Option(None, "--adapter-dir", help="Where to keep the fitted peft adapter directory "
                                     "(default: OUTPUT.adapter beside the export)."),
    rank: int = typer.Option(16, "--rank", help="LoRA rank (adapter route)."),
    lr: float = typer.Option(3e-4, "--lr", help="AdamW learning rate (adapter route)."),
    max_steps: int = typer.Option(540, "--max-steps", help="Step cap: 20 epochs over the probes, at most this many."),
    holdout: float = typer.Option(0.0, "--holdout", help="Fraction of probes held out to pick the best step (0: none)."),
    device: str = _device_option(),
    overwrite: bool = _overwrite_option(),
) -> None:
    """Write a composition of skills into the target and export it natively.

    Closed form (default): fold bank entries into the target's last linear map. Adapter: fit a LoRA on
    the target's tower so its live descriptors match the terms (method §1.4); the peft adapter
    directory is kept beside the export. An existing output is replaced only when it is a previous
    platonic export (or with --overwrite), by an atomic swap.
    """
    from ._checks import as_device, as_finite_scalar
    from .bank import OperatorBank
    from .models import check_spec, load_model
    from .preflight import check_cache_writable, check_output, refuse_output_among_inputs, same_path
    from .transfer import apply as apply_edit
    from .transfer import save_model

    try:
        if route not in ROUTES:
            raise InvalidInputError(f"--route {route!r}: choose closed_form or adapter")
        parsed = parse_terms(terms)
        as_device(device)
        check_spec(target)
        inputs = _input_paths(target, bank, *descriptors, *(extra or []), *probes)
        if route == "closed_form":
            if bank is None:
                raise InvalidInputError("the closed form needs --bank FILE (platonic solve writes one); "
                                        "or use --route adapter with --descriptors")
            if descriptors or extra:
                raise InvalidInputError("descriptor files go with --route adapter; the closed form reads --bank")
            used = default_alpha(parsed) if alpha is None else as_finite_scalar("--alpha", alpha)
            refuse_output_among_inputs({"-o": output}, inputs)
            _check_export_output(target, output, overwrite)
            loaded = OperatorBank.load(bank)
            model = load_model(target, device=device)
            record = apply_edit(model, loaded, parsed, alpha=used)
            path = save_model(model, output, overwrite=overwrite)
            console.print(f"wrote {path}: {target} + ({terms}) at alpha = {used:g} (closed form; the bank was "
                          f"solved on the target's {record.target_match} weights)")
            return
        if alpha is not None:
            raise InvalidInputError("--alpha is the closed form's strength; the adapter's is in the coefficients of --terms")
        if bank is not None:
            raise InvalidInputError("the adapter route fits to descriptors, not a bank: give --descriptors A.utd B.utd")
        files = list(descriptors) + list(extra or [])
        if not files:
            raise InvalidInputError("the adapter route needs the descriptors: --descriptors A.utd [B.utd ...]")
        adapter_path = adapter_dir or _adapter_dir_beside(output)
        if same_path(adapter_path, output):
            raise InvalidInputError(f"--adapter-dir {adapter_path} is the export's own path; give another directory")
        refuse_output_among_inputs({"-o": output, "--adapter-dir": adapter_path}, inputs)
        _check_export_output(target, output, overwrite)
        from .adapter import is_adapter_directory

        check_output(adapter_path, is_adapter_directory, False, "platonic adapter directory (choose another "
                     "--adapter-dir)", directory=True)
        check_cache_writable()
        loaded = _read_descriptors(files)
        config_options = dict(rank=rank, lora_alpha=2.0 * rank, lr=lr, max_steps=max_steps, holdout=holdout)
        from .adapter import adapt_config_from

        adapt_config_from(config_options)  # a bad setting is refused before the model loads
        model = load_model(target, device=device)
        _run_adapter(model, loaded, parsed, probes, adapter_path, output, config_options, overwrite)
    except PlatonicError as exc:
        _fail(exc)


def _run_adapter(model, descriptors, terms, probes, adapter_path: Path, output: Path, options: dict,
                 overwrite: bool = False) -> None:
    from .adapter import adapt, adapt_config_from, select_terms
    from .hashing import tensor_digest
    from .measurement import canonical_probes
    from .transfer import save_model

    config = adapt_config_from(options)
    chosen = select_terms(descriptors, terms)
    given = {}
    for p in probes:
        canon = canonical_probes(model, load_probes(p))
        given[tensor_digest(canon)] = canon
    adapter = adapt(model, chosen, config=config, probes=given)
    adapter.save(adapter_path)
    adapter.merge_into(model)
    path = save_model(model, output, {"adapter_dir": str(adapter_path)}, overwrite=overwrite)
    residuals = ", ".join(f"{k} {v:.3f}" for k, v in adapter.report["relative_residual"].items())
    console.print(f"fitted {adapter!r} in {adapter.report['steps']} steps; relative residual: {residuals}")
    console.print(f"wrote {adapter_path} (peft adapter) and {path}: {model.spec} + ({', '.join(terms)}) by the adapter route")


SETUPS = {  # name -> "module:function" returning an ExperimentSetup (imported on demand)
    "world": "platonic.experiments.world_setup:world_setup",
    "audio-world": "platonic.experiments.audio_world_setup:audio_world_setup",
    "toy": "platonic.experiments.toy:toy_setup",
}
WORLD_SETUPS = ("world", "audio-world")  # the embedded worlds: --models / --tasks / --world / --steps slice them


def _check_cpu_setup(setup: str, own: bool, device: str) -> None:
    """Refuse --device other than cpu for the built-in setups (world, audio-world, toy), which build and encode
    on the CPU: a GPU named there would otherwise be ignored without a word."""
    if setup in SETUPS and not own and str(device).split(":")[0] != "cpu":
        raise InvalidInputError(f"--device {device} does not apply to --setup {setup}: the built-in setups run on "
                                "the CPU (their models are tiny); --device applies to YAML and --model setups")


def load_setup(name: str, models=(), tasks=(), controls=(), sources=(), device: str = "cpu", names=None):
    """A built-in setup (world, audio-world, toy), a YAML setup file, or one made of command-line options.

    Options (NAME=VALUE strings) are added to a YAML file's setup; with the default setup (world)
    they make a setup of their own. With `names` (the experiments to run), a YAML or option setup that
    cannot run one of them (generalization without a related group) is refused before any model loads.
    """
    import importlib

    own = any((models, tasks, controls, sources))
    if name in SETUPS and not own:
        module, func = SETUPS[name].split(":")
        return getattr(importlib.import_module(module), func)()
    if name in SETUPS and name != "world":
        raise InvalidInputError(f"--model/--task/--control/--source cannot be added to the {name} setup; "
                                "use them alone or with a YAML file")
    if name not in SETUPS and not Path(name).is_file():
        raise InvalidInputError(f"unknown setup {name!r}: give {', '.join(SETUPS)}, or a YAML file (docs/experiments.md)")
    from .experiments.config import config_from_options, config_setup, read_config

    config = read_config(Path(name)) if name not in SETUPS else None
    if own:
        config = config_from_options(list(models), list(tasks), list(controls), list(sources), config)
    if names is not None:
        from .experiments.registry import check_experiments

        check_experiments(names, related_group=config.related_group, held_out=config.held_out)
    return config_setup(config, device=device)


def _registry_defaults(setting: str) -> str:
    """"addition 0.5, negation 1, ..." for one default of the protocol registry (for --help)."""
    from .experiments.registry import PROTOCOLS

    values = {name: p.alpha if setting == "alpha" else getattr(p.solve, setting) for name, p in PROTOCOLS.items()}
    return ", ".join(f"{name} {'its sweep' if v is None else f'{v:g}'}" for name, v in values.items())


def solve_settings(names, mu_a: float | None, mu_b: float | None, kind: str | None = None,
                   anchor_weight: float | None = None):
    """How `platonic experiment` solves: --mu-a / --mu-b / --solve / --anchor-weight where given, the
    rest from the registry entries of `names` (None when nothing is given: each entry keeps its own)."""
    from dataclasses import replace

    from ._checks import as_finite_scalar
    from .experiments.registry import PROTOCOLS, SolveSettings

    if mu_a is None and mu_b is None and kind is None and anchor_weight is None:
        return None
    defaults = {PROTOCOLS[n].solve for n in names}
    if len(defaults) > 1 and (mu_a is None or mu_b is None):
        raise InvalidInputError("the named experiments solve with different ridge weights; give both --mu-a and --mu-b")
    base = defaults.pop() if defaults else SolveSettings()
    given = {"mu_a": None if mu_a is None else as_finite_scalar("--mu-a", mu_a),
             "mu_b": None if mu_b is None else as_finite_scalar("--mu-b", mu_b), "kind": kind,
             "anchor_weight": None if anchor_weight is None else as_finite_scalar("--anchor-weight", anchor_weight)}
    if anchor_weight is not None and (kind or base.kind) != "anchored":
        raise InvalidInputError("--anchor-weight applies to the anchored solve; add --solve anchored")
    return replace(base, **{k: v for k, v in given.items() if v is not None})


@app.command()
def experiment(
    names: list[str] = typer.Argument(..., help="addition, negation, generalization, alpha, weight_space and/or orthoreg_sources; or "
                                      "task_arithmetic alone (method.md §2: flavours x OrthoReg, docs/experiments.md)."),
    setup: str = typer.Option("world", "--setup", help="world (the embedded world), audio-world (the embedded audio world), "
                              "toy (synthetic, seconds), or a YAML file naming models, tasks and sources (docs/experiments.md)."),
    model: list[str] = typer.Option([], "--model", help="NAME=SPEC: a model to run on (repeat; instead of --setup's)."),
    task: list[str] = typer.Option([], "--task", help="NAME (a registered task, e.g. eurosat) or NAME=SOURCE: an image "
                                   "(or, for audio-text models, sound) folder FOLDER/{train,test[,val]}/CLASS/*, "
                                   "hf:ORG/NAME[@REV], hf:DIR or torchvision:NAME@ROOT (docs/data.md)."),
    control: list[str] = typer.Option([], "--control", help="NAME (cifar100, imagenet) or NAME=SOURCE: a control set, "
                                      "FOLDER[/test]/CLASS/* or as --task."),
    source: list[str] = typer.Option([], "--source", help="MODEL/TASK=FINETUNE: .safetensors state dict, LoRA dir or spec."),
    output: Path = typer.Option(Path("runs/experiment"), "-o", "--output", help="Run directory to write."),
    plots: bool = typer.Option(True, help="Draw the PNG plots."),
    adapter_cells: int = typer.Option(0, "--adapter-cells", help="Also fit the adapter route on this many seeded "
                                      "addition and negation cells, beside the closed form on the same cells."),
    adapter_lr: float = typer.Option(None, "--adapter-lr", help="The adapter's learning rate (default: the paper's 3e-4)."),
    adapter_max_steps: int = typer.Option(None, "--adapter-max-steps", help="The adapter's step cap (default 540)."),
    adapter_holdout: float = typer.Option(None, "--adapter-holdout", help="Fraction of probes held out to pick the step."),
    alpha: float = typer.Option(None, "--alpha", help="Fold strength of the named experiments (default: each one's own "
                                f"from the protocol registry: {_registry_defaults('alpha')})."),
    mu_a: float = typer.Option(None, "--mu-a", help="Relative ridge weight on the probe side (default: each "
                               f"experiment's own, {_registry_defaults('mu_a')})."),
    mu_b: float = typer.Option(None, "--mu-b", help="Relative ridge weight on the prompt side (default: each "
                               f"experiment's own, {_registry_defaults('mu_b')})."),
    solve_kind: str = typer.Option(None, "--solve", help="paper (method.md §1.2, the default) or anchored: also "
                                   "penalise each operator's effect on a pool of unlabeled inputs (beyond the paper)."),
    anchor_images: Path = typer.Option(None, "--anchor-images", help="The anchored solve's pool: a folder of images or "
                                       "a .safetensors file with a 'probes' tensor (default: each task's pool from the "
                                       "other tasks' probes, 64 each)."),
    anchor_weight: float = typer.Option(None, "--anchor-weight", help="The pool's relative weight (1: as much as the "
                                        "probes)."),
    flavours: str = typer.Option(None, "--flavours", help="task_arithmetic: comma-separated fine-tuning flavours "
                                 "(default full,attention,lora,linear)."),
    ta_tasks: str = typer.Option(None, "--tasks", help="task_arithmetic, or any experiment on a world: comma-separated "
                                 "task names (default: all)."),
    ta_models: str = typer.Option(None, "--models", help="task_arithmetic, or any experiment on a world: comma-separated "
                                  "model names (default: all)."),
    lambdas: str = typer.Option(None, "--lambdas", help="task_arithmetic, orthoreg_sources: OrthoReg's lambda grid within "
                                "[0.1, 100], chosen on validation (default 0.1,1,10; orthoreg_sources 1,10)."),
    negation_flavours: str = typer.Option(None, "--negation-flavours", help="task_arithmetic: the flavours negation "
                                          "runs for (default: every flavour run)."),
    steps: int = typer.Option(None, "--steps", help="task_arithmetic, weight_space, orthoreg_sources: fine-tuning steps "
                              "per task of the cached fine-tunes (default 64, batch 64)."),
    val_size: str = typer.Option(None, "--val-size", metavar="N|all", help="task_arithmetic, weight_space, orthoreg_sources: use "
                                 "at most N items of each validation split for the choices (a seeded subset), or all of "
                                 "it (default: all; weight_space 500)."),
    world: Path = typer.Option(None, "--world", help="a built world directory to run on (default: "
                               "the cached world of $PLATONIC_WORLD_PROFILE, built if needed)."),
    device: str = _device_option(),
) -> None:
    """Run the paper's experiment protocols and write results.json, tables.md and plots.

    On the embedded world by default; on your own models with a YAML setup (--setup FILE.yaml) or with
    --model / --task / --source / --control (added to the YAML's when both are given). The run
    directory must be new, empty, or an earlier run's (whose results and plots are replaced).
    """
    from ._checks import as_device
    from .experiments import run_experiments
    from .experiments.registry import check_experiments
    from .experiments.report import check_run_directory
    from .preflight import check_cache_writable

    try:
        val_size = _val_size(val_size)
    except PlatonicError as exc:
        _fail(exc)
    ta_options = {"--flavours": flavours, "--tasks": ta_tasks, "--models": ta_models, "--lambdas": lambdas,
                  "--negation-flavours": negation_flavours, "--steps": steps, "--val-size": val_size, "--world": world}
    if "task_arithmetic" in names:
        other = {"--alpha": alpha, "--mu-a": mu_a, "--mu-b": mu_b, "--solve": solve_kind, "--anchor-images": anchor_images,
                 "--anchor-weight": anchor_weight, "--adapter-lr": adapter_lr, "--adapter-max-steps": adapter_max_steps,
                 "--adapter-holdout": adapter_holdout, "--adapter-cells": adapter_cells or None}
        _task_arithmetic_command(names, setup, model, task, control, source, output, plots, ta_options, other, device)
        return
    try:
        check_experiments(names)
        options, world_options = _protocol_options(names, setup, any((model, task, control, source)), ta_options)
        if adapter_cells < 0:
            raise InvalidInputError("--adapter-cells must be 0 (off) or a positive number of cells")
        from .adapter import adapt_config_from

        adapter_options = {"lr": adapter_lr, "max_steps": adapter_max_steps, "holdout": adapter_holdout}
        config = adapt_config_from({k: v for k, v in adapter_options.items() if v is not None})
        _check_cpu_setup(setup, any((model, task, control, source)), device)
        as_device(device)
        check_run_directory(output)
        check_cache_writable()
        ridge = solve_settings(names, mu_a, mu_b, solve_kind, anchor_weight)
        if anchor_images is not None and (ridge is None or ridge.kind != "anchored"):
            raise InvalidInputError("--anchor-images is the anchored solve's pool; add --solve anchored")
        pool = None if anchor_images is None else load_probes(anchor_images, "--anchor-images")
        loaded = _world_setup(world_options, setup) if world_options else load_setup(setup, model, task, control, source, device,
                                                                               names=names)
        run_experiments(loaded, names, output, plots=plots, alpha=alpha, solve=ridge, adapter_cells=adapter_cells,
                        adapter_config=config, anchor_images=pool, options=options, log=console.print)
    except PlatonicError as exc:
        _fail(exc)
    console.print((output / "tables.md").read_text())
    console.print(f"report: {output}/ (results.json, tables.md, plots)")


CACHED_SOURCE_EXPERIMENTS = ("weight_space", "orthoreg_sources")  # they fine-tune through the fine-tune cache
WHOLE_SPLITS = "all"


def _val_size(text: str | None) -> int | str | None:
    """--val-size: None (not given), "all" (whole validation splits) or a positive number of items."""
    if text is None or text.strip().lower() == WHOLE_SPLITS:
        return None if text is None else WHOLE_SPLITS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidInputError(f"--val-size takes a positive number of items or 'all' (whole validation splits); got {text!r}")
    return value


def _protocol_options(names, setup: str, own: bool, given: dict) -> tuple[dict, dict]:
    """The options of `platonic experiment` other than task_arithmetic's own: (runner options per experiment,
    the world setup's options). --val-size: weight_space and orthoreg_sources; --lambdas: orthoreg_sources;
    --models / --tasks / --world: the world setup; --steps: the world's cached sources (those two experiments)."""
    from .experiments.orthoreg_sources import DEFAULT_LAMBDAS

    stray = [k for k in ("--flavours", "--negation-flavours") if given[k] is not None]
    if stray:
        raise InvalidInputError(f"{', '.join(stray)} appl{'y' if len(stray) > 1 else 'ies'} to the task_arithmetic experiment only")
    cached = [n for n in names if n in CACHED_SOURCE_EXPERIMENTS]
    if given["--val-size"] is not None and not cached:
        raise InvalidInputError("--val-size applies to task_arithmetic, weight_space and orthoreg_sources")
    if given["--lambdas"] is not None and "orthoreg_sources" not in names:
        raise InvalidInputError("--lambdas applies to task_arithmetic and orthoreg_sources")
    if given["--steps"] is not None and (not cached or given["--steps"] < 1):
        raise InvalidInputError("--steps (a positive number of fine-tuning steps) applies to task_arithmetic, weight_space "
                                "and orthoreg_sources")
    world = {k: given[k] for k in ("--models", "--tasks", "--world", "--steps") if given[k] is not None}
    if world and (setup not in WORLD_SETUPS or own):
        raise InvalidInputError(f"{', '.join(world)} appl{'y' if len(world) > 1 else 'ies'} to the embedded worlds "
                                "(--setup world or audio-world, without --model/--task); a YAML setup names its own "
                                "models and tasks")
    options = {}
    for name in cached:
        size = given["--val-size"]
        options[name] = {} if size is None else {"val_size": None if size == WHOLE_SPLITS else size}
    if "orthoreg_sources" in names:
        options["orthoreg_sources"]["lambdas"] = (_floats(given["--lambdas"], "--lambdas") if given["--lambdas"]
                                                  else list(DEFAULT_LAMBDAS))
    return options, world


def _world_setup(options: dict, setup: str = "world"):
    """An embedded world (`setup`: world | audio-world) with some models / tasks, a built directory or the
    cached sources' fine-tuning steps."""
    from .experiments.audio_world_setup import audio_world_setup
    from .experiments.ta_parts import Recipe
    from .experiments.world_setup import world_setup

    steps = options.get("--steps")
    make = audio_world_setup if setup == "audio-world" else world_setup
    return make(models=_csv(options.get("--models"), "--models"), tasks=_csv(options.get("--tasks"), "--tasks"),
                       recipe=Recipe(**({"steps": steps} if steps is not None else {})), path=options.get("--world"))


def _csv(value: str | None, what: str) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise InvalidInputError(f"{what} needs one or more comma-separated names")
    return items


def _floats(value: str, what: str) -> list[float]:
    try:
        return [float(x) for x in _csv(value, what)]
    except ValueError:
        raise InvalidInputError(f"{what} must be comma-separated numbers, e.g. 0.1,1,10; got {value!r}") from None


def _task_arithmetic_command(names, setup, model, task, control, source, output, plots, options, other, device) -> None:
    """`platonic experiment task_arithmetic`: fine-tune per flavour with and without OrthoReg, add, negate, report."""
    from ._checks import as_device
    from .experiments.report import check_run_directory
    from .experiments.ta_setup import world_ta_setup
    from .experiments.task_arithmetic import DEFAULT_LAMBDAS, FLAVOURS, Recipe, task_arithmetic_experiment
    from .preflight import check_cache_writable

    try:
        if list(names) != ["task_arithmetic"]:
            raise InvalidInputError("task_arithmetic fine-tunes and writes its own tables: run it alone "
                                    "(platonic experiment task_arithmetic), the other experiments in another run")
        given = [k for k, v in other.items() if v is not None]
        if given:
            raise InvalidInputError(f"{', '.join(given)} {'do' if len(given) > 1 else 'does'} not apply to task_arithmetic "
                                    "(it chooses alpha on validation and fine-tunes its own task vectors)")
        _check_cpu_setup(setup, any((model, task, control, source)), device)
        as_device(device)
        check_run_directory(output)
        check_cache_writable()
        lambdas = _floats(options["--lambdas"], "--lambdas") if options["--lambdas"] else list(DEFAULT_LAMBDAS)
        flavours = _csv(options["--flavours"], "--flavours") or list(FLAVOURS)
        own = any((model, task, control, source))
        if source:
            raise InvalidInputError("--source does not apply to task_arithmetic: it fine-tunes every (model, task) itself")
        if setup == "world" and not own:
            loaded = world_ta_setup(options["--world"], models=_csv(options["--models"], "--models"))
        else:
            if options["--world"] is not None:
                raise InvalidInputError("--world names the embedded world's directory; it does not apply to a YAML or --model setup")
            if setup not in ("world",) and not Path(setup).is_file():
                raise InvalidInputError(f"task_arithmetic runs on --setup world or a YAML file; got {setup!r}")
            from .experiments.config import config_from_options, read_config
            from .experiments.ta_setup import config_ta_setup

            config = read_config(Path(setup), task_arithmetic=True) if setup != "world" else None
            if own:
                config = config_from_options(list(model), list(task), list(control), [], config, task_arithmetic=True)
            loaded = config_ta_setup(config, device=device)
            loaded = loaded.select(models=_csv(options["--models"], "--models"))
        loaded = loaded.select(tasks=_csv(options["--tasks"], "--tasks"))
        if options["--steps"] is not None and options["--steps"] < 1:
            raise InvalidInputError("--steps must be a positive number of fine-tuning steps")
        recipe = Recipe(**({"steps": options["--steps"]} if options["--steps"] is not None else {}))
        task_arithmetic_experiment(loaded, output, plots=plots, flavours=flavours, lambdas=lambdas, recipe=recipe,
                                   negation_flavours=_csv(options["--negation-flavours"], "--negation-flavours"),
                                   val_size=None if options["--val-size"] == WHOLE_SPLITS else options["--val-size"],
                                   log=console.print)
    except PlatonicError as exc:
        _fail(exc)
    console.print((output / "tables.md").read_text())
    console.print(f"report: {output}/ (results.json, tables.md, task-vector cosine heatmaps)")


@app.command()
def run(
    recipe: Path = typer.Argument(..., help="A recipe YAML: models, tasks, sources (or finetune:), edits, exports "
                                  "(docs/recipes.md; recipes/paper.yaml reproduces the paper)."),
    output: Path = typer.Option(None, "-o", "--output", help="Run directory to write (default runs/NAME, NAME the "
                                "recipe's name)."),
    check: bool = typer.Option(False, "--check", help="Validate the recipe (fields, model specs, task names, paths) "
                               "and stop; loads no model and reads no data."),
    device: str = _device_option(),
    overwrite: bool = _overwrite_option(),
) -> None:
    """Measure, solve, apply, export and evaluate everything a recipe names, into one run directory.

    The directory (resolved recipe, library versions, device, results.json, tables.md, descriptors, banks,
    exported models with model cards) is written beside its path and swapped in atomically; an existing
    one is replaced only when it is a previous run (or with --overwrite).
    """
    from ._checks import as_device
    from .experiments.recipe import read_recipe
    from .experiments.recipe_run import run_recipe
    from .models import check_spec
    from .preflight import check_cache_writable

    try:
        loaded = read_recipe(recipe)
        for name, spec in loaded.models.items():
            try:
                check_spec(spec)
            except InvalidInputError as exc:
                raise InvalidInputError(f"{recipe}: models.{name}: {exc}") from None
        if check:
            edits = sum(len(loaded.cells_of(e)) for e in loaded.edits)
            console.print(f"{recipe}: valid; {len(loaded.models)} models, {len(loaded.tasks)} tasks, "
                          f"{len(loaded.controls)} controls, {len(loaded.edits)} edits ({edits} cells), "
                          f"{len(loaded.exports)} exports")
            return
        as_device(device)
        check_cache_writable()
        out = output or Path("runs") / loaded.name
        run_recipe(loaded, out, device=device, overwrite=overwrite)
    except PlatonicError as exc:
        _fail(exc)
    console.print((out / "tables.md").read_text())
    console.print(f"run: {out}/ (recipe.yaml, results.json, tables.md, descriptors, banks, exports)")


@app.command()
def report(directory: Path = typer.Argument(..., help="A run directory holding results.json."),
           plots: bool = typer.Option(True, help="Re-draw the PNG plots too.")) -> None:
    """Re-render a run's tables (and plots) from its results.json."""
    from .experiments.report import load_results
    from .experiments.run import write_run
    from .preflight import check_writable_directory

    try:
        results = load_results(directory)
        check_writable_directory(directory, f"the report into {directory}")
        write_run(directory, results, plots=plots)
    except PlatonicError as exc:
        _fail(exc)
    console.print((directory / "tables.md").read_text())


DEMO_EXPERIMENTS = ("addition", "negation", "generalization")


@app.command()
def demo(
    setup: str = typer.Option("world", "--setup", help="world (the embedded world, built on first use), audio-world "
                              "(the embedded audio world, built on first use) or toy (synthetic, seconds)."),
    output: Path = typer.Option(Path("runs/demo"), "-o", "--output", help="Run directory to write."),
) -> None:
    """The paper's protocol on the embedded world: addition, negation, generalisation (CPU, minutes),
    then addition and negation again with the anchored solve, beside the paper's (solve_comparison.md).

    --setup audio-world runs the same on the embedded audio world. Builds the world first if it is not
    cached (profile from $PLATONIC_WORLD_PROFILE, default full).
    """
    from .experiments import SolveSettings, run_experiments
    from .experiments.report import check_run_directory, render_solve_comparison
    from .preflight import check_cache_writable
    from .storage import atomic_write

    try:
        if setup not in SETUPS:
            raise InvalidInputError(f"--setup {setup!r}: the demo runs on {', '.join(SETUPS)} (your own models: "
                                    "platonic experiment)")
        check_run_directory(output)
        check_cache_writable()
        console.print(f"[bold]platonic demo[/]: {', '.join(DEMO_EXPERIMENTS)} on the {setup} setup")
        loaded = load_setup(setup)
        paper = run_experiments(loaded, list(DEMO_EXPERIMENTS), output)
        anchored = run_experiments(loaded, ["addition", "negation"], output / "anchored", plots=False,
                                   solve=SolveSettings(kind="anchored"), trained_baselines=False)
        comparison = render_solve_comparison(paper, anchored)
        atomic_write(output / "solve_comparison.md", lambda tmp: Path(tmp).write_text(comparison))
    except PlatonicError as exc:
        _fail(exc)
    console.print((output / "tables.md").read_text())
    console.print(comparison)
    console.print(f"report: {output}/ (results.json, tables.md, plots); re-render with `platonic report {output}`")


if __name__ == "__main__":  # pragma: no cover
    app()
