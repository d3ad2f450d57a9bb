"""`platonic run RECIPE.yaml`: everything a recipe names, measured, solved, applied, exported and evaluated."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import (
    batch_size_option,
    check_compute,
    console,
    device_option,
    dtype_option,
    num_workers_option,
    overwrite_option,
)


def run(
    recipe: Path = typer.Argument(..., help="A recipe YAML: models, tasks, sources (or finetune:), edits, exports "
                                  "(docs/recipes.md; recipes/paper.yaml reproduces the paper)."),
    output: Path = typer.Option(None, "-o", "--output", help="Run directory to write (default runs/NAME, NAME the "
                                "recipe's name)."),
    check: bool = typer.Option(False, "--check", help="Validate the recipe (fields, model specs, task names, and that "
                               "every path it names exists: data folders, sources, weights, anchor pools) and stop; "
                               "loads no model and reads no data."),
    device: str = device_option(),
    dtype: str = dtype_option(),
    batch_size: int = batch_size_option(),
    num_workers: int = num_workers_option(),
    overwrite: bool = overwrite_option(),
) -> None:
    """Measure, solve, apply, export and evaluate everything a recipe names, into one run directory.

    The directory (resolved recipe, library versions, device, results.json, tables.md, descriptors, banks,
    exported models with model cards) is written beside its path and swapped in atomically; an existing
    one is replaced only when it is a previous run (or with --overwrite). --device, --dtype, --batch-size and
    --num-workers override the recipe's keys of the same names. In a launch of N processes (accelerate
    launch --multi_gpu --num_processes N -m platonic.cli run ...) the recipe's jobs (source fine-tunes,
    measurements, encodings, adapter fits) are spread over them; killed, it resumes with the unfinished ones.
    """
    from ..errors import InvalidInputError
    from ..preflight import check_cache_writable

    if not recipe.is_file():
        raise InvalidInputError(f"the recipe {recipe} does not exist" + (" (it is a directory)" if recipe.is_dir() else "")
                                + "; give a recipe YAML (docs/recipes.md)")
    check_compute(device)
    from ..recipe.config import read_recipe

    loaded = read_recipe(recipe)
    loaded.check_models(str(recipe))
    loaded.check_files()
    if check:
        console.print(f"{recipe}: valid; {loaded.summary()}; every path it names exists")
        return
    settings = loaded.compute(device, dtype, batch_size, num_workers)
    check_cache_writable()
    from ..recipe import run_recipe

    out = output or Path("runs") / loaded.name
    run_recipe(loaded, out, overwrite=overwrite, compute=settings, log=console.print)
    from ..distributed import current

    console.quiet = not current().is_main
    console.print((out / "tables.md").read_text())
    console.print(f"run: {out}/ (recipe.yaml, results.json, tables.md, descriptors, banks, exports)")
