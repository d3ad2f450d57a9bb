"""`platonic world ...` commands (mounted by platonic.cli as the `world` sub-app).

Errors are one line on stderr (`error: ...`, exit code 2), as everywhere in the command line.
"""

from __future__ import annotations

import typer

from .cli_errors import fail
from .errors import PlatonicError

world_app = typer.Typer(help="The embedded world: real small data, a zoo of tiny dual encoders, fine-tuned sources.",
                        no_args_is_help=True, rich_markup_mode=None)


def _print_checks(report: dict) -> None:
    """One line per acceptance check of a world report: PASS or FAIL and its name."""
    for k, v in report["summary"]["checks"].items():
        typer.echo(f"  {'PASS' if v else 'FAIL'}  {k}")


@world_app.command("build")
def build(
    profile: str = typer.Option("full", "--profile", help="tiny (tests, ~1.5 min) or full (~25-30 min on 2 cores, then ~10 min for its report)"),
    seed: int = typer.Option(0, "--seed", help="world seed (data, initialisations, batch order)"),
    force: bool = typer.Option(False, "--force", help="rebuild even if a complete build is cached"),
    workers: int = typer.Option(2, "--workers", min=1, help="single-threaded worker processes"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress (bars on a terminal, one line per job in a log)"),
):
    """Build (or find in the cache) the world, measure its report (the experiment engine) and print its checks."""
    from .experiments.world_checks import world_report
    from .preflight import check_cache_writable
    from .world.build import build_world, check_profile

    try:
        check_profile(profile)
        check_cache_writable()
        path = build_world(profile, seed=seed, force=force, progress=not quiet, workers=workers)
        report = world_report(path, progress=not quiet, force=force)
    except PlatonicError as exc:  # the world's MissingDataError included
        fail(exc)
    typer.echo(f"world: {path}")
    typer.echo(f"report: {path / 'report.md'}")
    _print_checks(report)


@world_app.command("diagnose")
def diagnose(profile: str = typer.Option("full", "--profile", help="tiny or full"), seed: int = typer.Option(0, "--seed"),
             quiet: bool = typer.Option(False, "--quiet", help="no progress")):
    """Why the closed form works or fails on the world: per model, the ceilings of a last-layer edit
    (linear probe, best linear map), the oracle, its locality, and the participation ratio of the
    probe embeddings; then the checks. Builds and measures the world first where needed."""
    from .experiments.world_checks import world_report
    from .experiments.world_report import diagnostics_table
    from .preflight import check_cache_writable
    from .world.build import check_profile, ensure_world

    try:
        check_profile(profile)
        check_cache_writable()
        report = world_report(ensure_world(profile, seed, progress=not quiet), progress=not quiet)
    except PlatonicError as exc:
        fail(exc)
    typer.echo("\n".join(diagnostics_table(report)))
    _print_checks(report)


@world_app.command("path")
def where(profile: str = typer.Option("full", "--profile", help="tiny or full"), seed: int = typer.Option(0, "--seed")):
    """Print the cache directory of a world build (built or not)."""
    from .world.build import world_dir

    try:
        typer.echo(str(world_dir(profile, seed)))
    except PlatonicError as exc:
        fail(exc)


@world_app.command("audio-build")
def audio_build(
    profile: str = typer.Option("full", "--profile", help="tiny (tests, about 1 min) or full (about 20 min on one worker)"),
    seed: int = typer.Option(0, "--seed", help="audio world seed (data, initialisations, batch order)"),
    force: bool = typer.Option(False, "--force", help="rebuild even if a complete build is cached"),
    workers: int = typer.Option(2, "--workers", min=1, help="single-threaded worker processes"),
    diagnostics: bool = typer.Option(False, "--diagnostics", help="also the slow diagnostics (linear probe, best linear map, locality)"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress (bars on a terminal, one line per job in a log)"),
):
    """Build (or find in the cache) the audio world (issue 15: its zoo and sources), measure its report and print its checks."""
    from .experiments.audio_world_checks import audio_world_report
    from .preflight import check_cache_writable
    from .world.audio.build import build_audio_world, check_profile

    try:
        check_profile(profile)
        check_cache_writable()
        path = build_audio_world(profile, seed=seed, force=force, progress=not quiet, workers=workers)
        report = audio_world_report(path, progress=not quiet, force=force, diagnostics=diagnostics)
    except PlatonicError as exc:  # MissingDataError included
        fail(exc)
    typer.echo(f"audio world: {path}")
    typer.echo(f"report: {path / 'report.md'}")
    _print_checks(report)


@world_app.command("audio-path")
def audio_where(profile: str = typer.Option("full", "--profile", help="tiny or full"), seed: int = typer.Option(0, "--seed")):
    """Print the cache directory of an audio world build (built or not)."""
    from .world.audio.build import audio_world_dir

    try:
        typer.echo(str(audio_world_dir(profile, seed)))
    except PlatonicError as exc:
        fail(exc)
