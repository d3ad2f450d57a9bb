"""The `platonic` command line (typer)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from . import __version__
from .errors import PlatonicError

app = typer.Typer(
    help="Move fine-tuned skills between different multimodal dual encoders (Platonic Task Arithmetic).",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()

from .world.cli import world_app  # noqa: E402 - typer sub-app; imports nothing heavy

app.add_typer(world_app, name="world")


def _fail(exc: Exception) -> None:
    console.print(f"[bold red]error:[/] {exc}")
    raise typer.Exit(code=2)


def _version(value: bool) -> None:
    if value:
        console.print(f"platonic {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    """platonic: universal task descriptors, closed-form operators, operator banks."""


@app.command()
def inspect(path: Path = typer.Argument(..., help="A descriptor, operator or bank file."),
            as_json: bool = typer.Option(False, "--json", help="Print the metadata record as JSON.")) -> None:
    """Print what a platonic file holds."""
    from .storage import read_artifact

    try:
        tensors, record = read_artifact(path)
    except PlatonicError as exc:
        _fail(exc)
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


def _print_operators(metas, deltas, title: str) -> None:
    table = Table(title=title)
    for col in ("terms", "form", "shape", "norm", "residual", "mu_a", "mu_b"):
        table.add_column(col)
    for meta, delta in zip(metas, deltas):
        terms = " ".join(f"{t['coefficient']:+g}*{t['task']}@{t['source']}" for t in meta["terms"])
        fmt = lambda v: "-" if v is None else f"{v:.4g}"  # noqa: E731
        table.add_row(terms, meta["form"], str(tuple(delta.shape)), f"{float(delta.double().norm()):.4g}",
                      fmt(meta.get("residual")), fmt(meta.get("mu_a")), fmt(meta.get("mu_b")))
    console.print(table)


def _device_option():
    return typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda:0.")


def parse_terms(text: str) -> dict[str, float]:
    """ "eurosat:+1,dtd:-0.5" -> {"eurosat": 1.0, "dtd": -0.5}; a key may be "task@source"."""
    from .errors import InvalidInputError

    terms: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.rpartition(":")
        if not sep or not key:
            raise InvalidInputError(f"term {part!r} is not TASK:COEFFICIENT (e.g. eurosat:+1)")
        try:
            terms[key] = float(value)
        except ValueError:
            raise InvalidInputError(f"term {part!r}: coefficient {value!r} is not a number") from None
    if not terms:
        raise InvalidInputError("--terms is empty; give e.g. 'eurosat:+1,dtd:-1'")
    return terms


def load_probes(path: Path):
    """A folder of images (made canonical) or a .safetensors file holding a tensor named 'probes'."""
    from safetensors.torch import load_file

    from .errors import InvalidInputError
    from .models.images import canonical_images

    if path.is_dir():
        return canonical_images(path)
    if path.is_file() and path.suffix == ".safetensors":
        tensors = load_file(str(path))
        if "probes" not in tensors:
            raise InvalidInputError(f"{path} holds no tensor named 'probes' (it has: {', '.join(tensors) or 'none'})")
        return tensors["probes"]
    raise InvalidInputError(f"--probes {path}: give a folder of images or a .safetensors file with a 'probes' tensor")


def read_prompts(prompts: Path | None, classes: str | None, template: str) -> list[str]:
    from .errors import InvalidInputError

    if prompts is not None:
        lines = [ln.strip() for ln in prompts.read_text().splitlines() if ln.strip()]
        if not lines:
            raise InvalidInputError(f"{prompts} holds no prompts (one per line)")
        return lines
    if classes:
        if "{}" not in template:
            raise InvalidInputError(f"--template {template!r} has no '{{}}' where the class name goes")
        return [template.format(c.strip()) for c in classes.split(",") if c.strip()]
    raise InvalidInputError("give the class prompts: --prompts FILE (one per line) or --classes a,b,c [--template ...]")


@app.command()
def measure(
    model: str = typer.Option(..., "--model", help="The pre-trained model spec, e.g. open_clip:ViT-B-32/laion2b_s34b_b79k."),
    finetuned: str = typer.Option(..., "--finetuned", help="Fine-tune: model spec, .safetensors state dict, or LoRA adapter dir."),
    task: str = typer.Option(..., "--task", help="Task name stored in the descriptor."),
    probes: Path = typer.Option(..., "--probes", help="Folder of probe images, or .safetensors with a 'probes' tensor."),
    prompts: Path = typer.Option(None, "--prompts", help="Text file, one class prompt per line."),
    classes: str = typer.Option(None, "--classes", help="Comma-separated class names (with --template)."),
    template: str = typer.Option("a photo of a {}.", "--template", help="Prompt template for --classes."),
    output: Path = typer.Option(..., "-o", "--output", help="Descriptor file to write."),
    device: str = _device_option(),
    batch_size: int = typer.Option(64, "--batch-size"),
) -> None:
    """Measure the universal task descriptor of a fine-tune (N probes x M prompts)."""
    from .measurement import measure as measure_descriptor

    try:
        desc = measure_descriptor(model, finetuned, load_probes(probes), read_prompts(prompts, classes, template), task,
                                  batch_size=batch_size, device=device)
        desc.save(output)
    except PlatonicError as exc:
        _fail(exc)
    console.print(f"wrote {output}: {desc!r}")


@app.command()
def solve(
    descriptors: list[Path] = typer.Argument(..., help="Descriptor files."),
    target: str = typer.Option(..., "--target", help="Target model spec."),
    output: Path = typer.Option(..., "-o", "--output", help="Bank file to write."),
    probes: list[Path] = typer.Option([], "--probes", help="Probe files/folders, if not in the probe store."),
    mu_a: float = typer.Option(1e-2, "--mu-a", help="Relative ridge weight on the probe side."),
    mu_b: float = typer.Option(1e-6, "--mu-b", help="Relative ridge weight on the prompt side."),
    device: str = _device_option(),
) -> None:
    """Solve descriptors into an operator bank for a target model (any architecture)."""
    from .descriptor import Descriptor
    from .hashing import tensor_digest
    from .measurement import canonical_probes
    from .models import load_model
    from .transfer import solve_bank

    try:
        model = load_model(target, device=device)
        given = {}
        for p in probes:
            canon = canonical_probes(model, load_probes(p))
            given[tensor_digest(canon)] = canon
        bank = solve_bank(model, [Descriptor.load(d) for d in descriptors], probes=given, mu_a=mu_a, mu_b=mu_b)
        bank.save(output)
    except PlatonicError as exc:
        _fail(exc)
    console.print(f"wrote {output}: {bank!r}")
    _print_operators([op._meta() for op in bank], [op.delta for op in bank], title="solved operators")


ROUTES = ("closed_form", "adapter")


def default_alpha(terms: dict[str, float]) -> float:
    """The paper's strengths: 1.0 when every term is negative (negation, c = -1), else 0.5 (addition)."""
    return 1.0 if all(c < 0 for c in terms.values()) else 0.5


def _adapter_dir_beside(output: Path) -> Path:
    return output.with_name(output.name.removesuffix(".safetensors") + ".adapter")


@app.command()
def apply(
    extra: list[Path] = typer.Argument(None, help="More descriptor files (adapter route), e.g. after --descriptors A.utd."),
    target: str = typer.Option(..., "--target", help="Target model spec (the bank's target)."),
    terms: str = typer.Option(..., "--terms", help="Signed composition, e.g. 'eurosat:+1,dtd:-1' (task or task@source)."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the edited model in its own format."),
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
) -> None:
    """Write a composition of skills into the target and export it natively.

    Closed form (default): fold bank entries into the target's last linear map. Adapter: fit a LoRA on
    the target's tower so its live descriptors match the terms (method §1.4); the peft adapter
    directory is kept beside the export.
    """
    from .bank import OperatorBank
    from .errors import InvalidInputError
    from .models import load_model
    from .transfer import apply as apply_edit
    from .transfer import save_model

    try:
        if route not in ROUTES:
            raise InvalidInputError(f"--route {route!r}: choose closed_form or adapter")
        parsed = parse_terms(terms)
        model = load_model(target, device=device)
        if route == "closed_form":
            if bank is None:
                raise InvalidInputError("the closed form needs --bank FILE (platonic solve writes one); "
                                        "or use --route adapter with --descriptors")
            if descriptors or extra:
                raise InvalidInputError("descriptor files go with --route adapter; the closed form reads --bank")
            used = default_alpha(parsed) if alpha is None else alpha
            apply_edit(model, OperatorBank.load(bank), parsed, alpha=used)
            path = save_model(model, output)
            console.print(f"wrote {path}: {target} + ({terms}) at alpha = {used:g} (closed form)")
            return
        if alpha is not None:
            raise InvalidInputError("--alpha is the closed form's strength; the adapter's is in the coefficients of --terms")
        if bank is not None:
            raise InvalidInputError("the adapter route fits to descriptors, not a bank: give --descriptors A.utd B.utd")
        files = list(descriptors) + list(extra or [])
        if not files:
            raise InvalidInputError("the adapter route needs the descriptors: --descriptors A.utd [B.utd ...]")
        adapter_path = adapter_dir or _adapter_dir_beside(output)
        _run_adapter(model, files, parsed, probes, adapter_path, output,
                     dict(rank=rank, lora_alpha=2.0 * rank, lr=lr, max_steps=max_steps, holdout=holdout))
    except PlatonicError as exc:
        _fail(exc)


def _run_adapter(model, files, terms, probes, adapter_path: Path, output: Path, options: dict) -> None:
    from .adapter import adapt, adapt_config_from, select_terms
    from .descriptor import Descriptor
    from .hashing import tensor_digest
    from .measurement import canonical_probes
    from .transfer import save_model

    config = adapt_config_from(options)
    chosen = select_terms([Descriptor.load(f) for f in files], terms)
    given = {}
    for p in probes:
        canon = canonical_probes(model, load_probes(p))
        given[tensor_digest(canon)] = canon
    adapter = adapt(model, chosen, config=config, probes=given)
    adapter.save(adapter_path)
    adapter.merge_into(model)
    path = save_model(model, output, {"adapter_dir": str(adapter_path)})
    residuals = ", ".join(f"{k} {v:.3f}" for k, v in adapter.report["relative_residual"].items())
    console.print(f"fitted {adapter!r} in {adapter.report['steps']} steps; relative residual: {residuals}")
    console.print(f"wrote {adapter_path} (peft adapter) and {path}: {model.spec} + ({', '.join(terms)}) by the adapter route")


SETUPS = {  # name -> "module:function" returning an ExperimentSetup (imported on demand)
    "world": "platonic.experiments.world_setup:world_setup",
    "toy": "platonic.experiments.toy:toy_setup",
}


def load_setup(name: str, models=(), tasks=(), controls=(), sources=(), device: str = "cpu"):
    """A built-in setup (world, toy), a YAML setup file, or one made of command-line options.

    Options (NAME=VALUE strings) are added to a YAML file's setup; with the default setup (world)
    they make a setup of their own.
    """
    import importlib

    from .errors import InvalidInputError

    own = any((models, tasks, controls, sources))
    if name in SETUPS and not own:
        module, func = SETUPS[name].split(":")
        return getattr(importlib.import_module(module), func)()
    if name in SETUPS and name != "world":
        raise InvalidInputError(f"--model/--task/--control/--source cannot be added to the {name} setup; "
                                "use them alone or with a YAML file")
    if name not in SETUPS and not Path(name).is_file():
        raise InvalidInputError(f"unknown setup {name!r}: give world, toy, or a YAML file (docs/experiments.md)")
    from .experiments.config import config_from_options, config_setup, read_config

    config = read_config(Path(name)) if name not in SETUPS else None
    if own:
        config = config_from_options(list(models), list(tasks), list(controls), list(sources), config)
    return config_setup(config, device=device)


@app.command()
def experiment(
    names: list[str] = typer.Argument(..., help="addition, negation, generalization, alpha and/or weight_space."),
    setup: str = typer.Option("world", "--setup", help="world (the embedded world), toy (synthetic, seconds), or a YAML file "
                              "naming models, tasks and sources (docs/experiments.md)."),
    model: list[str] = typer.Option([], "--model", help="NAME=SPEC: a model to run on (repeat; instead of --setup's)."),
    task: list[str] = typer.Option([], "--task", help="NAME=FOLDER: a task's images, FOLDER/{train,test[,val]}/CLASS/*."),
    control: list[str] = typer.Option([], "--control", help="NAME=FOLDER: a control set, FOLDER[/test]/CLASS/*."),
    source: list[str] = typer.Option([], "--source", help="MODEL/TASK=FINETUNE: .safetensors state dict, LoRA dir or spec."),
    output: Path = typer.Option(Path("runs/experiment"), "-o", "--output", help="Run directory to write."),
    plots: bool = typer.Option(True, help="Draw the PNG plots."),
    adapter_cells: int = typer.Option(0, "--adapter-cells", help="Also fit the adapter route on this many seeded "
                                      "addition and negation cells, beside the closed form on the same cells."),
    adapter_lr: float = typer.Option(None, "--adapter-lr", help="The adapter's learning rate (default: the paper's 3e-4)."),
    adapter_max_steps: int = typer.Option(None, "--adapter-max-steps", help="The adapter's step cap (default 540)."),
    adapter_holdout: float = typer.Option(None, "--adapter-holdout", help="Fraction of probes held out to pick the step."),
    device: str = _device_option(),
) -> None:
    """Run the paper's experiment protocols and write results.json, tables.md and plots.

    On the embedded world by default; on your own models with a YAML setup (--setup FILE.yaml) or with
    --model / --task / --source / --control (added to the YAML's when both are given).
    """
    from .experiments import PROTOCOLS, run_experiments
    from .errors import InvalidInputError

    try:
        unknown = [n for n in names if n not in PROTOCOLS]
        if unknown:
            raise InvalidInputError(f"unknown experiment(s) {', '.join(unknown)}; choose from {', '.join(PROTOCOLS)}")
        if adapter_cells < 0:
            raise InvalidInputError("--adapter-cells must be 0 (off) or a positive number of cells")
        from .adapter import adapt_config_from

        options = {"lr": adapter_lr, "max_steps": adapter_max_steps, "holdout": adapter_holdout}
        config = adapt_config_from({k: v for k, v in options.items() if v is not None})
        run_experiments(load_setup(setup, model, task, control, source, device), names, output, plots=plots,
                        adapter_cells=adapter_cells, adapter_config=config)
    except PlatonicError as exc:
        _fail(exc)
    console.print((output / "tables.md").read_text())
    console.print(f"report: {output}/ (results.json, tables.md, plots)")


@app.command()
def report(directory: Path = typer.Argument(..., help="A run directory holding results.json."),
           plots: bool = typer.Option(True, help="Re-draw the PNG plots too.")) -> None:
    """Re-render a run's tables (and plots) from its results.json."""
    from .experiments.report import load_results, write_run

    try:
        results = load_results(directory)
    except (OSError, ValueError) as exc:
        _fail(exc)
    write_run(directory, results, plots=plots)
    console.print((directory / "tables.md").read_text())


DEMO_EXPERIMENTS = ("addition", "negation", "generalization")


@app.command()
def demo(
    setup: str = typer.Option("world", "--setup", help="world (the embedded world, built on first use) or toy (synthetic, seconds)."),
    output: Path = typer.Option(Path("runs/demo"), "-o", "--output", help="Run directory to write."),
) -> None:
    """The paper's protocol on the embedded world: addition, negation, generalisation (CPU, minutes).

    Builds the world first if it is not cached (profile from $PLATONIC_WORLD_PROFILE, default full).
    """
    from .experiments import run_experiments

    console.print(f"[bold]platonic demo[/]: {', '.join(DEMO_EXPERIMENTS)} on the {setup} setup")
    try:
        run_experiments(load_setup(setup), list(DEMO_EXPERIMENTS), output)
    except PlatonicError as exc:
        _fail(exc)
    console.print((output / "tables.md").read_text())
    console.print(f"report: {output}/ (results.json, tables.md, plots); re-render with `platonic report {output}`")


if __name__ == "__main__":  # pragma: no cover
    app()
