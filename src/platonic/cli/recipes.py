"""`platonic run RECIPE.yaml`: everything a recipe names, measured, solved, applied, exported and evaluated."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import console, device_option, overwrite_option


def run(
    recipe: Path = typer.Argument(..., help="A recipe YAML: models, tasks, sources (or finetune:), edits, exports "
                                  "(docs/recipes.md; recipes/paper.yaml reproduces the paper)."),
    output: Path = typer.Option(None, "-o", "--output", help="Run directory to write (default runs/NAME, NAME the "
                                "recipe's name)."),
    check: bool = typer.Option(False, "--check", help="Validate the recipe (fields, model specs, task names, and that "
                               "every path it names exists: data folders, sources, weights, anchor pools) and stop; "
                               "loads no model and reads no data."),
    device: str = device_option(),
    overwrite: bool = overwrite_option(),
) -> None:
    """Measure, solve, apply, export and evaluate everything a recipe names, into one run directory.

    The directory (resolved recipe, library versions, device, results.json, tables.md, descriptors, banks,
    exported models with model cards) is written beside its path and swapped in atomically; an existing
    one is replaced only when it is a previous run (or with --overwrite).
    """
    from .._checks import check_device
    from ..errors import InvalidInputError
    from ..preflight import check_cache_writable

    if not recipe.is_file():
        raise InvalidInputError(f"the recipe {recipe} does not exist" + (" (it is a directory)" if recipe.is_dir() else "")
                                + "; give a recipe YAML (docs/recipes.md)")
    check_device(device)
    from ..recipe.config import read_recipe

    loaded = read_recipe(recipe)
    loaded.check_models(str(recipe))
    loaded.check_files()
    if check:
        console.print(f"{recipe}: valid; {loaded.summary()}; every path it names exists")
        return
    check_cache_writable()
    from ..recipe import run_recipe

    out = output or Path("runs") / loaded.name
    run_recipe(loaded, out, device=device, overwrite=overwrite)
    console.print((out / "tables.md").read_text())
    console.print(f"run: {out}/ (recipe.yaml, results.json, tables.md, descriptors, banks, exports)")
