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
    from .world.build import KINDS, check_profile, ensure_world

    try:
        check_profile(profile)
        check_cache_writable()
        report = world_report(ensure_world(profile, seed, progress=not quiet, kinds=KINDS), progress=not quiet)
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


@world_app.command("probes")
def probes(
    task: str = typer.Argument(..., help="a task of the world (e.g. fashion) or of the audio world with --audio (e.g. pitch)"),
    output: str = typer.Option(..., "-o", "--output", help="the .safetensors file to write (a tensor named 'probes'); "
                               "the class prompts go beside it, one per line, with the suffix .txt"),
    audio: bool = typer.Option(False, "--audio", help="the audio world's task (clips (N, 16000) float32 at 16 kHz)"),
    profile: str = typer.Option("full", "--profile", help="tiny or full"),
    seed: int = typer.Option(0, "--seed"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace existing files"),
):
    """Write a world task's probes (30 train items per class, seed 42) and class prompts, for `platonic
    measure --probes FILE --prompts FILE.txt` and `platonic solve` on models outside the world (the world
    is built first where needed)."""
    from pathlib import Path

    from .errors import InvalidInputError
    from .preflight import check_cache_writable
    from .storage import atomic_write, refuse_existing, write_tensors

    try:
        out = Path(output)
        if out.suffix != ".safetensors":
            raise InvalidInputError(f"-o {out}: name a .safetensors file (the prompts go to {out.with_suffix('.txt').name})")
        for path, what in ((out, "probe file"), (out.with_suffix(".txt"), "prompt file")):
            refuse_existing(path, lambda _: False, overwrite, what)  # both checked before either is written
        check_cache_writable()
        grid = _world_grid(task, audio, profile, seed)
        write_tensors(out, {"probes": grid[0]}, {"task": task, "world": "audio" if audio else "image", "profile": profile,
                                                 "seed": seed})
        atomic_write(out.with_suffix(".txt"), lambda tmp: Path(tmp).write_text("\n".join(grid[1]) + "\n", encoding="utf-8"))
    except PlatonicError as exc:
        fail(exc)
    typer.echo(f"wrote {out} ({tuple(grid[0].shape)} {str(grid[0].dtype).removeprefix('torch.')}) and "
               f"{out.with_suffix('.txt')} ({len(grid[1])} prompts)")


def _world_grid(task: str, audio: bool, profile: str, seed: int):
    """(probes, prompts) of `task` in the built world (image, or audio with `audio`), built where needed."""
    from .errors import InvalidInputError

    if audio:
        from .world.audio import dataset
        from .world.audio.build import check_profile, ensure_audio_world, world_data_file
        from .world.audio.tasks import TASK_NAMES

        names = TASK_NAMES
    else:
        from .world import data as wd
        from .world.build import check_profile, ensure_world

        names = wd.TASK_NAMES
    if task not in names:
        raise InvalidInputError(f"unknown {'audio ' if audio else ''}world task {task!r}; choose from {', '.join(names)}"
                                + ("" if audio else " (or add --audio for the audio world's)"))
    check_profile(profile)
    if audio:
        d = dataset.load_audio_data(world_data_file(ensure_audio_world(profile, seed)))[task]
        return d.probes, list(d.task.prompts)
    from .experiments.world_setup import world_data

    d = world_data(ensure_world(profile, seed))[task]
    return d.probes, list(wd.TASKS[task].prompts)
