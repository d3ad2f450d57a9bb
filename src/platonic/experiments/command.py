"""`platonic experiment` and `platonic demo` as requests the engine checks and runs.

The command line fills one frozen `ExperimentRequest` from its options and hands it to `run_request`;
every rule about which option applies to which experiment is read from the registries here:
`OPTION_TAKERS` asks each `registry.Protocol` entry whether it takes an option, and the setup options
(--models, --tasks, --world, --steps) apply where `setups.SETUPS` names an embedded world (and to the
standalone task_arithmetic, which slices its own setup). Nothing is loaded before every option is checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, ConfigDict

from .._checks import as_finite_scalar
from ..adapter import adapt_config_from
from ..compute import Compute, using
from ..data.probe_files import load_probes
from ..distributed import join, process_device
from ..errors import InvalidInputError
from ..merging import MERGE_RULES
from ..preflight import check_cache_writable
from ..solve_config import CLI_FLAGS, SolveConfig
from ..storage import atomic_write
from .protocols.orthoreg_sources import DEFAULT_LAMBDAS as ORTHOREG_SOURCE_LAMBDAS
from .protocols.paper import SOURCE_CHOICES
from .protocols.task_arithmetic import check_merges
from .registry import PROTOCOLS, Protocol, check_experiments
from .report import check_run_directory, headline_means, render_headline, render_solve_comparison
from .run import run_experiments
from .setups import SETUPS, WORLD_SETUPS, check_device, labelled_setup, load_setup, world_slice

WHOLE_SPLITS = "all"
DEMO_EXPERIMENTS = ("addition", "negation", "generalization")
# The anchored solve's pool weight in the demo, per setup (default: SolveConfig's 1). The trunk world's 2 was chosen
# on the tasks' and controls' validation splits, never a test split: the smallest of 1, 2, 4 that kept every
# control within 2 points in addition and 3 in negation there (docs/lab/2026-12-06-anchor-weight-on-val.md).
DEMO_ANCHOR_WEIGHTS = {"trunk-world": 2.0}

# option -> whether a protocol takes it (a registry entry answers for itself)
OPTION_TAKERS: dict[str, Callable[[Protocol], bool]] = {
    "--alpha": lambda p: p.solves, "--mu-a": lambda p: p.solves, "--mu-b": lambda p: p.solves,
    "--solve": lambda p: p.solves, "--anchor-images": lambda p: p.solves, "--anchor-weight": lambda p: p.solves,
    "--adapter-cells": lambda p: p.adapter_part is not None, "--adapter-lr": lambda p: p.adapter_part is not None,
    "--adapter-max-steps": lambda p: p.adapter_part is not None,
    "--adapter-holdout": lambda p: p.adapter_part is not None,
    "--flavours": lambda p: "flavours" in p.options, "--negation-flavours": lambda p: "negation_flavours" in p.options,
    "--lambdas": lambda p: "lambdas" in p.options, "--val-size": lambda p: "val_size" in p.options,
    "--merges": lambda p: "merges" in p.options, "--sources": lambda p: "sources" in p.options,
    "--steps": lambda p: p.fine_tunes,
    "--baselines": lambda p: bool(p.baselines), "--ascent-steps": lambda p: "gradient_ascent" in p.baselines,
}
SLICES = ("--models", "--tasks", "--world", "--steps")  # the embedded worlds' setup options
OPTION_FIELDS = ("alpha", "mu_a", "mu_b", "solve", "anchor_images", "anchor_weight", "adapter_cells", "adapter_lr",
                 "adapter_max_steps", "adapter_holdout", "flavours", "negation_flavours", "lambdas", "merges", "sources",
                 "val_size", "steps", "models", "tasks", "world", "baselines", "ascent_steps")


class ExperimentRequest(BaseModel):
    """What `platonic experiment` was asked (its options, None where not given)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    names: tuple[str, ...]
    setup: str = "world"
    model: tuple[str, ...] = ()
    task: tuple[str, ...] = ()
    control: tuple[str, ...] = ()
    source: tuple[str, ...] = ()
    output: Path = Path("runs/experiment")
    plots: bool = True
    device: str | None = None
    dtype: str | None = None
    batch_size: int | None = None
    num_workers: int = 0
    alpha: float | None = None
    mu_a: float | None = None
    mu_b: float | None = None
    solve: str | None = None
    anchor_images: Path | None = None
    anchor_weight: float | None = None
    adapter_cells: int = 0
    adapter_lr: float | None = None
    adapter_max_steps: int | None = None
    adapter_holdout: float | None = None
    flavours: str | None = None
    negation_flavours: str | None = None
    lambdas: str | None = None
    merges: str | None = None
    sources: str | None = None
    steps: int | None = None
    val_size: str | None = None
    models: str | None = None
    tasks: str | None = None
    world: Path | None = None
    baselines: str | None = None
    ascent_steps: int | None = None

    @property
    def own_models(self) -> bool:
        return any((self.model, self.task, self.control, self.source))

    def given(self) -> dict[str, object]:
        """The experiment options given (not None; --adapter-cells not 0), by their flags (--FIELD-NAME)."""
        values = {f"--{name.replace('_', '-')}": getattr(self, name) for name in OPTION_FIELDS}
        return {k: v for k, v in values.items() if v is not None and not (k == "--adapter-cells" and v == 0)}


def _names_text(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def check_options(request: ExperimentRequest, protocols: list[Protocol]) -> None:
    """Refuse an option none of the named experiments takes (naming those that do), and the embedded
    worlds' setup options on another setup."""
    given = request.given()
    alone = next((p for p in protocols if p.standalone), None)
    if alone is not None:
        refused = [k for k in given if k in OPTION_TAKERS and not OPTION_TAKERS[k](alone)]
        if refused:
            raise InvalidInputError(f"{', '.join(refused)} {'do' if len(refused) > 1 else 'does'} not apply to "
                                    f"{alone.name} ({alone.standalone})")
        if request.source:
            raise InvalidInputError(f"--source does not apply to {alone.name}: it fine-tunes every (model, task) itself")
        return
    for option in given:
        if option in OPTION_TAKERS and not any(OPTION_TAKERS[option](p) for p in protocols):
            takers = PROTOCOLS.taking(OPTION_TAKERS[option])
            if all(PROTOCOLS[t].standalone for t in takers):
                raise InvalidInputError(f"{option} applies to the {_names_text(takers)} experiment only")
            raise InvalidInputError(f"{option} applies to {_names_text(takers)}")
    world = [k for k in SLICES if k in given]
    if world and (request.setup not in WORLD_SETUPS or request.own_models):
        raise InvalidInputError(f"{', '.join(world)} appl{'y' if len(world) > 1 else 'ies'} to the embedded worlds "
                                f"(--setup {' or '.join(WORLD_SETUPS)}, without --model/--task); a YAML setup names its "
                                "own models and tasks")


def _csv(value: str | None, what: str) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise InvalidInputError(f"{what} needs one or more comma-separated names")
    return items


def _floats(value: str, what: str) -> list[float]:
    try:
        return [float(x) for x in _csv(value, what)]
    except ValueError:
        raise InvalidInputError(f"{what} must be comma-separated numbers, e.g. 0.1,1,10; got {value!r}") from None


def baseline_options(request: ExperimentRequest, protocol: Protocol) -> dict:
    """--baselines (comma-separated among the entry's `baselines`, or none) and --ascent-steps, as the options
    of `protocol` ({} where it takes neither, or neither is given: its defaults run every baseline)."""
    if not protocol.baselines:
        return {}
    chosen = protocol.baselines
    if request.baselines is not None:
        names = [] if request.baselines.strip().lower() == "none" else _csv(request.baselines, "--baselines")
        unknown = [n for n in names if n not in protocol.baselines]
        if unknown:
            raise InvalidInputError(f"--baselines: {', '.join(unknown)} is not a baseline of {protocol.name}; choose among "
                                    f"{', '.join(protocol.baselines)}, or none")
        chosen = tuple(n for n in protocol.baselines if n in names)
    out = {"baselines": chosen} if request.baselines is not None else {}
    if request.ascent_steps is not None:
        if request.ascent_steps < 1:
            raise InvalidInputError("--ascent-steps must be a positive number of gradient-ascent steps")
        if "gradient_ascent" not in chosen:
            raise InvalidInputError("--ascent-steps is the gradient-ascent baseline's budget, which --baselines leaves "
                                    "out; add gradient_ascent to --baselines or drop --ascent-steps")
        out["ascent_steps"] = request.ascent_steps
    return out


def val_size(text: str | None) -> int | None:
    """--val-size: None (not given, or "all": whole validation splits) or a positive number of items."""
    if text is None or text.strip().lower() == WHOLE_SPLITS:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidInputError(f"--val-size takes a positive number of items or 'all' (whole validation splits); got {text!r}")
    return value


def solve_config(request: ExperimentRequest, names) -> SolveConfig | None:
    """How the experiments solve: --mu-a / --mu-b / --solve / --anchor-weight / --anchor-images where given, the
    rest from the registry entries of `names` (None when nothing is given: each entry keeps its own)."""
    given = {"mu_a": request.mu_a, "mu_b": request.mu_b, "kind": request.solve, "anchor_weight": request.anchor_weight,
             "anchor_images": request.anchor_images}
    if all(v is None for v in given.values()):
        return None
    defaults = {PROTOCOLS[n].solve for n in names}
    if len(defaults) > 1 and (request.mu_a is None or request.mu_b is None):
        raise InvalidInputError("the named experiments solve with different ridge weights; give both --mu-a and --mu-b")
    base = defaults.pop() if defaults else SolveConfig()
    kind = request.solve or base.kind
    if request.anchor_weight is not None and kind != "anchored":
        raise InvalidInputError("--anchor-weight applies to the anchored solve; add --solve anchored")
    if request.anchor_images is not None and kind != "anchored":
        raise InvalidInputError("--anchor-images is the anchored solve's pool; add --solve anchored")
    for flag, value in (("--mu-a", request.mu_a), ("--mu-b", request.mu_b), ("--anchor-weight", request.anchor_weight)):
        if value is not None:
            as_finite_scalar(flag, value)
    return SolveConfig.parse({**base.model_dump(), **{k: v for k, v in given.items() if v is not None}}, CLI_FLAGS)


def run_request(request: ExperimentRequest, log: Callable[[str], None] = print) -> dict:
    """Check every option of `request`, then load its setup and run its experiments into `request.output`."""
    names = list(request.names)
    check_experiments(names)
    protocols = [PROTOCOLS[n] for n in names]
    check_options(request, protocols)
    sizes = val_size(request.val_size)
    if request.steps is not None and request.steps < 1:
        raise InvalidInputError("--steps must be a positive number of fine-tuning steps")
    if request.adapter_cells < 0:
        raise InvalidInputError("--adapter-cells must be 0 (off) or a positive number of cells")
    settings = request_compute(request)
    check_run_directory(request.output)
    check_cache_writable()
    with using(settings):
        return _run(request, names, protocols, sizes, settings.device, log)


def request_compute(request: ExperimentRequest) -> Compute:
    """The request's --device / --dtype / --batch-size / --num-workers, checked, with this process's device.

    The built-in setups (world, audio-world, toy) run on the CPU, so their default device is the CPU and
    another is refused (`setups.check_device`); a launch of several processes is joined here."""
    builtin = request.setup in SETUPS and not request.own_models
    if request.device is not None:
        check_device(request.setup, request.own_models, request.device)
    settings = Compute.parse("cpu" if builtin and request.device is None else request.device, request.dtype,
                             request.batch_size, request.num_workers)
    join(settings.torch_device())
    return settings.model_copy(update={"device": process_device(str(settings.torch_device()))})


def _run(request: ExperimentRequest, names: list[str], protocols: list[Protocol], sizes: int | None, device: str,
         log) -> dict:
    alone = protocols[0] if protocols[0].standalone else None
    if alone is not None:
        return _run_standalone(request, alone, sizes, device, log)
    adapter = adapt_config_from({k: v for k, v in {"lr": request.adapter_lr, "max_steps": request.adapter_max_steps,
                                                  "holdout": request.adapter_holdout}.items() if v is not None})
    ridge = solve_config(request, names)
    pool = None if request.anchor_images is None else load_probes(request.anchor_images, "--anchor-images")
    options = {p.name: {"val_size": sizes} for p in protocols if "val_size" in p.options and request.val_size is not None}
    for protocol in protocols:
        options.setdefault(protocol.name, {}).update(baseline_options(request, protocol))
    if request.sources is not None:
        if request.sources not in SOURCE_CHOICES:
            raise InvalidInputError(f"--sources is one of {', '.join(SOURCE_CHOICES)} (the other models' descriptors one "
                                    f"by one, their mean, or both); got {request.sources!r}")
        for p in protocols:
            if "sources" in p.options:
                options.setdefault(p.name, {})["sources"] = request.sources
    if "orthoreg_sources" in names:
        options.setdefault("orthoreg_sources", {})["lambdas"] = (_floats(request.lambdas, "--lambdas") if request.lambdas
                                                                 else list(ORTHOREG_SOURCE_LAMBDAS))
    given = request.given()
    if any(k in given for k in SLICES):
        setup = world_slice(request.setup, _csv(request.models, "--models"), _csv(request.tasks, "--tasks"), request.world,
                            request.steps)
    else:
        def runnable(config) -> None:
            check_experiments(names, related_group=config.related_group, held_out=config.held_out)

        setup = load_setup(request.setup, request.model, request.task, request.control, request.source, device,
                           check=runnable, log=log)
    return run_experiments(setup, names, request.output, plots=request.plots, alpha=request.alpha, solve=ridge,
                           adapter_cells=request.adapter_cells, adapter_config=adapter, anchor_images=pool, options=options,
                           log=log)


def _run_standalone(request: ExperimentRequest, protocol: Protocol, sizes: int | None, device: str, log) -> dict:
    """task_arithmetic: its own labelled setup, sliced by --models / --tasks, and its runner's options."""
    from .engine import TaskVectorRecipe

    options = {"val_size": sizes,
               "negation_flavours": _csv(request.negation_flavours, "--negation-flavours"),
               "merges": check_merges(_csv(request.merges, "--merges") if request.merges else list(MERGE_RULES))}
    if request.lambdas:
        options["lambdas"] = _floats(request.lambdas, "--lambdas")
    if request.flavours:
        options["flavours"] = _csv(request.flavours, "--flavours")
    setup = labelled_setup(request.setup, request.model, request.task, request.control, request.world,
                           _csv(request.models, "--models"), _csv(request.tasks, "--tasks"), device)
    recipe = setup.recipe or TaskVectorRecipe()  # a YAML's `task_vectors:` block; --steps over its steps
    options["recipe"] = recipe.model_copy(update={"steps": request.steps}) if request.steps is not None else recipe
    return run_experiments(setup, [protocol.name], request.output, plots=request.plots,
                           options={protocol.name: options}, log=log)


def _demo_anchor(setup: str) -> dict:
    weight = DEMO_ANCHOR_WEIGHTS.get(setup)
    return {} if weight is None else {"anchor_weight": weight}


def run_demo(setup: str, output: Path, log: Callable[[str], None] = print, students: bool = False,
             world: Path | None = None) -> tuple[dict, str]:
    """The demo: addition, negation and generalisation on a named setup, then addition and negation again with
    the anchored solve (pool weight `DEMO_ANCHOR_WEIGHTS[setup]`, else SolveConfig's); writes the run into
    `output`, with solve_comparison.md and the headline tables (headline.json, headline.md: what the README
    shows) beside; returns (results, comparison).

    students (trunk-world only): the trunk world's towers trained from scratch beside its three trunk models
    (built on first use), so that retention is printed per (source family, target family) across families.
    world: a built directory of the setup's world (default: the cached one, built if needed)."""
    if setup not in SETUPS:
        raise InvalidInputError(f"--setup {setup!r}: the demo runs on {', '.join(SETUPS)} (your own models: "
                                "platonic experiment)")
    if students and setup != "trunk-world":
        raise InvalidInputError(f"--students adds the trunk world's towers trained from scratch; --setup {setup} has "
                                "none (use --setup trunk-world)")
    if world is not None and setup not in WORLD_SETUPS:
        raise InvalidInputError(f"--world names a built world directory; --setup {setup} is not a world "
                                f"({', '.join(WORLD_SETUPS)})")
    check_run_directory(output)
    check_cache_writable()
    models = None
    if students:
        from ..world.image.trunkworld.recipe import MODEL_NAMES, STUDENT_NAMES

        models = list(MODEL_NAMES + STUDENT_NAMES)
    log(f"platonic demo: {', '.join(DEMO_EXPERIMENTS)} on the {setup} setup" + (" with its students" if students else ""))
    loaded = world_slice(setup, models, path=world) if students or world is not None else load_setup(setup)
    paper = run_experiments(loaded, list(DEMO_EXPERIMENTS), output)
    anchored = run_experiments(loaded, ["addition", "negation"], Path(output) / "anchored", plots=False,
                               solve=SolveConfig(kind="anchored", **_demo_anchor(setup)), trained_baselines=False)
    comparison = render_solve_comparison(paper, anchored)
    atomic_write(Path(output) / "solve_comparison.md", lambda tmp: Path(tmp).write_text(comparison))
    headline = headline_means(paper)
    atomic_write(Path(output) / "headline.json", lambda tmp: Path(tmp).write_text(json.dumps(headline, indent=1)))
    atomic_write(Path(output) / "headline.md", lambda tmp: Path(tmp).write_text(render_headline(headline)))
    return paper, comparison
