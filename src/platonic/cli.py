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


@app.command()
def demo(seed: int = typer.Option(0, help="Seed of the synthetic world."),
         alpha: float = typer.Option(1.0, help="Strength the operator is folded at.")) -> None:
    """Transfer a fine-tune between two different synthetic dual encoders (CPU, seconds).

    Until the embedded world of tiny trained models lands, the demo runs on a synthetic latent world
    (platonic.synthetic): measure a descriptor on one model, solve it on the other, fold, evaluate.
    """
    from .synthetic import run_demo

    result = run_demo(seed=seed, alpha=alpha)
    console.print("[bold]platonic demo[/]: synthetic world of two dual encoders (d = 48 and d = 80) sharing one latent "
                  f"space; one shared fine-tune; operator folded at alpha = {alpha}.")
    table = Table(title="held-out accuracy of the target (2,000 draws, 10 classes)")
    keys = ["source", "target", "zero-shot", "transferred", "oracle", "own fine-tune", "UTD cosine", "transferred residual"]
    for k in keys:
        table.add_column(k)
    for row in result["rows"]:
        table.add_row(*[row[k] if isinstance(row[k], str) else f"{row[k]:.3f}" for k in keys])
    console.print(table)
    console.print("transferred: the source's descriptor solved on the target and folded; oracle: the target's own "
                  "descriptor through the same solve; UTD cosine: between the two models' descriptors of the task.")


if __name__ == "__main__":  # pragma: no cover
    app()
