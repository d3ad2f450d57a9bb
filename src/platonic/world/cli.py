"""`platonic world ...` commands (mounted by platonic.cli as the `world` sub-app)."""

from __future__ import annotations

import json

import typer

world_app = typer.Typer(help="The embedded world: real small data, a zoo of tiny dual encoders, fine-tuned sources.",
                        no_args_is_help=True)


@world_app.command("build")
def build(
    profile: str = typer.Option("full", "--profile", help="tiny (tests, ~1 min) or full (~20-30 min on 2 cores)"),
    seed: int = typer.Option(0, "--seed", help="world seed (data, initialisations, batch order)"),
    force: bool = typer.Option(False, "--force", help="rebuild even if a complete build is cached"),
    workers: int = typer.Option(2, "--workers", help="single-threaded worker processes"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bars"),
):
    """Build (or find in the cache) the world and print where its report is."""
    from .build import PROFILES, build_world
    from .data import MissingDataError

    if profile not in PROFILES:
        raise typer.BadParameter(f"--profile must be one of {', '.join(PROFILES)}")
    try:
        path = build_world(profile, seed=seed, force=force, progress=not quiet, workers=workers)
    except MissingDataError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    report = json.loads((path / "report.json").read_text())
    checks = report["summary"]["checks"]
    typer.echo(f"world: {path}")
    typer.echo(f"report: {path / 'report.md'}")
    for k, v in checks.items():
        typer.echo(f"  {'PASS' if v else 'FAIL'}  {k}")


@world_app.command("path")
def where(profile: str = typer.Option("full", "--profile"), seed: int = typer.Option(0, "--seed")):
    """Print the cache directory of a world build (built or not)."""
    from .build import world_dir

    typer.echo(str(world_dir(profile, seed)))
