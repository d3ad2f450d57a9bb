"""The `platonic` command line (typer): the app and its commands, one module per command group.

Every error a command raises (a `PlatonicError`, or a usage error) reaches `OneLineErrors`, which prints
it as one line on stderr (`error: ...`, exit code 2): no command catches errors itself.
"""

from __future__ import annotations

import typer

from .._version import __version__
from .artifacts import clean, convert, inspect
from .common import console
from .errors import OneLineErrors
from .experiments import demo, experiment, report
from .finetune import finetune
from .recipes import run
from .transfer import apply, measure, solve
from .world import world_app

app = typer.Typer(
    help="Move fine-tuned skills between different multimodal dual encoders (Platonic Task Arithmetic).",
    no_args_is_help=True,
    add_completion=False,
    cls=OneLineErrors,  # every error: one line `error: ...` on stderr, exit code 2
    rich_markup_mode=None,  # help texts are plain: FOLDER[/test] is a path, not markup
)


def _version(value: bool) -> None:
    if value:
        console.print(f"platonic {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    """platonic: universal task descriptors, closed-form operators, operator banks."""


for command in (inspect, measure, convert, finetune, solve, apply, experiment, run, report, demo, clean):
    app.command()(command)
app.add_typer(world_app, name="world")
