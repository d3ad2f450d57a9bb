"""`platonic experiment`, `report` and `demo`: the paper's protocols, a run's tables again, the demo.

The options are handed to the engine as one `ExperimentRequest` (`platonic.experiments.command`), which
checks which option applies to which experiment against the protocol registry.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import InvalidInputError
from .common import batch_size_option, console, dtype_option, num_workers_option

# --help is answered without importing the engine (which imports torch): these texts are the protocol
# registry's, written out; tests/test_cli_speed.py checks that they equal what the registry says
EXPERIMENT_NAMES = "addition, negation, generalization, alpha, weight_space, orthoreg_sources, task_arithmetic"
REGISTRY_DEFAULTS = {
    "alpha": "addition 0.5, negation 1, generalization 0.5, alpha its sweep, weight_space 0.5, orthoreg_sources 0.5",
    "mu_a": "addition 0.01, negation 0.01, generalization 0.01, alpha 0.01, weight_space 0.01, orthoreg_sources 0.01",
    "mu_b": "addition 1e-06, negation 1e-06, generalization 1e-06, alpha 1e-06, weight_space 1e-06, "
            "orthoreg_sources 1e-06",
}
NEGATION_BASELINES = "target_as_source, gradient_ascent"  # the registry's negation entry, `baselines`
ASCENT_STEPS = 20  # platonic.finetuning.GRADIENT_ASCENT.steps: the worlds' and YAML setups' budget


def registry_defaults(setting: str) -> str:
    """"addition 0.5, negation 1, ..." for one default of the protocols that solve descriptors, read from the
    registry (what `REGISTRY_DEFAULTS` must say)."""
    from ..experiments.registry import PROTOCOLS

    values = {name: p.alpha if setting == "alpha" else getattr(p.solve, setting) for name, p in PROTOCOLS.items()
              if p.solves}
    return ", ".join(f"{name} {'its sweep' if v is None else f'{v:g}'}" for name, v in values.items())


def experiment_names() -> str:
    """The registered experiments, read from the registry (what `EXPERIMENT_NAMES` must say)."""
    from ..experiments.registry import PROTOCOLS

    return ", ".join(PROTOCOLS)


def experiment(
    names: list[str] = typer.Argument(..., help=f"{EXPERIMENT_NAMES}; task_arithmetic runs alone "
                                      "(method.md §2: flavours x OrthoReg, docs/experiments.md)."),
    setup: str = typer.Option("world", "--setup", help="world (the embedded world), audio-world (the embedded audio world), "
                              "trunk-world (the image world on pretrained trunks), toy (synthetic, seconds), or a YAML file naming models, tasks and sources (docs/experiments.md)."),
    model: list[str] = typer.Option([], "--model", help="NAME=SPEC: a model to run on (repeat; instead of --setup's)."),
    task: list[str] = typer.Option([], "--task", help="NAME (a registered task, e.g. eurosat) or NAME=SOURCE: an image "
                                   "(or, for audio-text models, sound) folder FOLDER/{train,test[,val]}/CLASS/*, "
                                   "hf:ORG/NAME[@REV], hf:DIR or torchvision:NAME@ROOT (docs/data.md)."),
    control: list[str] = typer.Option([], "--control", help="NAME (cifar100, imagenet) or NAME=SOURCE: a control set, "
                                      "FOLDER[/test]/CLASS/* or as --task."),
    source: list[str] = typer.Option([], "--source", help="MODEL/TASK=FINETUNE: .safetensors state dict, LoRA dir or spec."),
    sources: str = typer.Option(None, "--sources", help="addition, negation: single (each other model's descriptor, the "
                                "default), consensus (their mean, one source per target and task) or both (beyond the paper)."),
    output: Path = typer.Option(Path("runs/experiment"), "-o", "--output", help="Run directory to write."),
    plots: bool = typer.Option(True, help="Draw the PNG plots."),
    adapter_cells: int = typer.Option(0, "--adapter-cells", help="Also fit the adapter route on this many seeded "
                                      "addition and negation cells, beside the closed form on the same cells."),
    adapter_lr: float = typer.Option(None, "--adapter-lr", help="The adapter's learning rate (default: the paper's 3e-4)."),
    adapter_max_steps: int = typer.Option(None, "--adapter-max-steps", help="The adapter's step cap (default 540)."),
    adapter_holdout: float = typer.Option(None, "--adapter-holdout", help="Fraction of probes held out to pick the step."),
    alpha: float = typer.Option(None, "--alpha", help="Fold strength of the named experiments (default: each one's own "
                                f"from the protocol registry: {REGISTRY_DEFAULTS['alpha']})."),
    mu_a: float = typer.Option(None, "--mu-a", help="Relative ridge weight on the probe side (default: each "
                               f"experiment's own, {REGISTRY_DEFAULTS['mu_a']})."),
    mu_b: float = typer.Option(None, "--mu-b", help="Relative ridge weight on the prompt side (default: each "
                               f"experiment's own, {REGISTRY_DEFAULTS['mu_b']})."),
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
    merges: str = typer.Option(None, "--merges", help="task_arithmetic: comma-separated merge rules of the addition "
                               "(default sum,ties,dare,iso_c,tsv_m: task arithmetic, TIES, DARE, ISO-C, TSV-M; docs/experiments.md)."),
    negation_flavours: str = typer.Option(None, "--negation-flavours", help="task_arithmetic: the flavours negation "
                                          "runs for (default: every flavour run)."),
    steps: int = typer.Option(None, "--steps", help="task_arithmetic, weight_space, orthoreg_sources: fine-tuning steps "
                              "per task of the cached fine-tunes (default 64, batch 64)."),
    val_size: str = typer.Option(None, "--val-size", metavar="N|all", help="task_arithmetic, weight_space, orthoreg_sources: use "
                                 "at most N items of each validation split for the choices (a seeded subset), or all of "
                                 "it (default: all; weight_space 500)."),
    world: Path = typer.Option(None, "--world", help="a built world directory to run on (default: "
                               "the cached world of $PLATONIC_WORLD_PROFILE, built if needed)."),
    baselines: str = typer.Option(None, "--baselines", help=f"negation: the baselines to run beside the closed form, "
                                  f"comma-separated among {NEGATION_BASELINES}, or none (default: all; gradient ascent "
                                  "fine-tunes every target on every task, the slow part on your own models)."),
    ascent_steps: int = typer.Option(None, "--ascent-steps", help="negation: the gradient-ascent baseline's budget in "
                                     f"steps (default: the setup's, {ASCENT_STEPS} on the worlds and YAML setups, or a "
                                     "YAML's gradient_ascent: block)."),
    device: str = typer.Option(None, "--device", help="torch device, e.g. cpu, cuda or cuda:1 (default: cuda when a "
                               "GPU is present, else cpu; the built-in setups run on the cpu). In a launch of N "
                               "processes process k takes cuda:k."),
    dtype: str = dtype_option(),
    batch_size: int = batch_size_option(),
    num_workers: int = num_workers_option(),
) -> None:
    """Run the paper's experiment protocols and write results.json, tables.md and plots.

    On the embedded world by default; on your own models with a YAML setup (--setup FILE.yaml) or with
    --model / --task / --source / --control (added to the YAML's when both are given). The run
    directory must be new, empty, or an earlier run's (whose results and plots are replaced). In a launch of
    N processes (accelerate launch --multi_gpu --num_processes N -m platonic.cli experiment ...) the run's
    jobs (fine-tunes, measurements, encodings, adapter fits) are spread over them and the main process writes.
    """
    unknown = [n for n in names if n not in EXPERIMENT_NAMES.split(", ")]
    if unknown:  # the registry's own message, before the engine (and torch) load
        raise InvalidInputError(f"unknown experiment(s) {', '.join(unknown)}; choose from {EXPERIMENT_NAMES}")
    from ..distributed import current
    from ..experiments.command import ExperimentRequest, run_request

    request = ExperimentRequest(
        names=tuple(names), setup=setup, model=tuple(model), task=tuple(task), control=tuple(control),
        source=tuple(source), output=output, plots=plots, device=device, dtype=dtype, batch_size=batch_size,
        num_workers=num_workers, alpha=alpha, mu_a=mu_a, mu_b=mu_b,
        solve=solve_kind, anchor_images=anchor_images, anchor_weight=anchor_weight, adapter_cells=adapter_cells,
        adapter_lr=adapter_lr, adapter_max_steps=adapter_max_steps, adapter_holdout=adapter_holdout, flavours=flavours,
        negation_flavours=negation_flavours, lambdas=lambdas, merges=merges, sources=sources, steps=steps,
        val_size=val_size, models=ta_models, tasks=ta_tasks, world=world, baselines=baselines, ascent_steps=ascent_steps)
    results = run_request(request, log=console.print)
    console.quiet = not current().is_main
    console.print((output / "tables.md").read_text())
    what = "task-vector cosine heatmaps" if results["settings"]["experiments"] == ["task_arithmetic"] else "plots"
    console.print(f"report: {output}/ (results.json, tables.md, {what})")


def report(directory: Path = typer.Argument(..., help="A run directory holding results.json (platonic experiment, "
                                          "demo or run)."),
           plots: bool = typer.Option(True, help="Re-draw the PNG plots too.")) -> None:
    """Re-render a run's tables (and plots) from its results.json: a `platonic experiment` or `demo` run, or a
    `platonic run` recipe run (its tables only)."""
    from ..errors import ArtifactError, InvalidInputError
    from ..layouts import RESULTS_FILE, is_recipe_run, is_run_directory, output_kind

    if not (directory / RESULTS_FILE).is_file() and output_kind(directory) is None:
        raise ArtifactError(f"{directory / RESULTS_FILE} does not exist; give a run directory written by `platonic "
                            "experiment`, `platonic demo` or `platonic run`")
    if is_recipe_run(directory):
        from ..recipe.report import rerender_recipe_run

        console.print(rerender_recipe_run(directory))
        return
    kind = None if is_run_directory(directory) else output_kind(directory)
    if kind is not None:
        raise InvalidInputError(f"{directory} is {kind}, not a run directory; `platonic report` re-renders the tables "
                                "of `platonic experiment`, `platonic demo` and `platonic run` directories")
    from ..experiments.run import rerender_run

    rerender_run(directory, plots=plots)
    console.print((directory / "tables.md").read_text())


def demo(
    setup: str = typer.Option("trunk-world", "--setup", help="trunk-world (the image world on pretrained "
                              "EfficientNet-Lite trunks, built on first use), world (the image world's tiny towers "
                              "trained from scratch, built on first use), audio-world (the embedded audio world, built "
                              "on first use) or toy (synthetic, seconds)."),
    output: Path = typer.Option(Path("runs/demo"), "-o", "--output", help="Run directory to write."),
    students: bool = typer.Option(False, "--students", help="trunk-world: also its three towers trained from "
                                  "scratch (a ResNet pair and a ViT; built on first use, up to about 26 minutes on 2 "
                                  "cores), so retention is printed per (source family, target family) across families."),
    world: Path | None = typer.Option(None, "--world", help="a built world directory to run on (default: the cached "
                                      "world of $PLATONIC_WORLD_PROFILE, built if needed)."),
) -> None:
    """The paper's protocol on the embedded image world on pretrained trunks: addition, negation, generalisation
    (CPU, minutes), then addition and negation again with the anchored solve, beside the paper's
    (solve_comparison.md).

    --setup world / audio-world runs the same on the tiny-tower image world / the audio world. Builds the world
    first if it is not cached (profile from $PLATONIC_WORLD_PROFILE, default full).
    """
    from ..experiments.command import run_demo

    _, comparison = run_demo(setup, output, log=console.print, students=students, world=world)
    console.print((output / "tables.md").read_text())
    console.print(comparison)
    console.print(f"report: {output}/ (results.json, tables.md, plots); re-render with `platonic report {output}`")
