"""One registry of the experiment protocols: each experiment is one `Protocol` entry.

An entry names everything the runner, the command line and the report need of one experiment: its
runner, whether it runs on the fast path, the parts that train (a slow baseline, the adapter route
on a subset of its cells), its methods in table order with their labels, the table's title and
columns, its report function, the paper reference, its defaults (the fold strength alpha and the
solve's ridge weights), and which options it takes: its runner's own keywords (`options`), whether it
solves descriptors (the solve's options), whether it fine-tunes through the fine-tune cache (`steps`),
and whether it runs alone on a setup of its own (`standalone`). `platonic experiment` takes its
defaults and checks every option against the named entries (`experiments.command`);
`PROTOCOLS.register` refuses a name that is already taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

from ..errors import InvalidInputError
from ..solve_config import SolveConfig
from .protocols.adapter_cells import addition_adapter, addition_adapter_jobs, negation_adapter, negation_adapter_jobs
from .protocols.orthoreg_sources import orthoreg_sources
from .protocols.paper import (
    NEGATION_BASELINES,
    addition,
    alpha_sweep,
    generalization,
    gradient_ascent_jobs,
    negation,
    negation_gradient_ascent,
)
from .protocols.task_arithmetic import run_task_arithmetic, task_arithmetic_jobs
from .protocols.task_arithmetic_report import task_arithmetic_tables
from .protocols.weight_space import weight_space
from .tables import alpha_table, orthoreg_sources_tables, protocol_table

# labels of the methods several experiments share; each entry labels its own
SHARED_LABELS = {"zero_shot": "zero-shot", "closed_form": "closed form",
                 "adapter": "adapter (LoRA fitted to the descriptors)",
                 "consensus": "closed form, consensus of sources (mean of the other models' descriptors)"}
ADAPTER_METHODS = ("zero_shot", "closed_form", "adapter")


@dataclass(frozen=True)
class Protocol:
    """One experiment.

    runner(setup, store, [alpha=...,] progress=...) -> cell records; alpha is passed when `alpha`
    (the default fold strength) is not None. slow_part(setup, store, progress=...) trains or
    re-encodes models (run after the fast path, with all threads); adapter_part(setup, store, cells,
    config, alpha=..., progress=...) fits the adapter route on `cells` seeded cells (records of
    experiment "NAME/adapter", methods `ADAPTER_METHODS`). options: the keyword options the runner
    takes beyond alpha (e.g. "val_size"); reports: it also takes report= (a dict it fills with
    "timings" and "diagnostics", merged into results.json) and log= (a line printer).
    report(protocol, results, registry) -> the Markdown lines of its tables (`experiments.tables`).
    solves: it solves descriptors in closed form (the solve's settings apply); fine_tunes: it fine-tunes
    through the fine-tune cache (the recipe's steps apply). slow_jobs(setup, store) and
    adapter_jobs(setup, store, cells, config) -> [`distributed.Job`]: the independent pieces of slow_part
    and adapter_part, which a launch of several processes spreads before the run (`experiments.run`);
    jobs(setup, **options): a standalone runner's. standalone: a non-empty note says the
    experiment runs alone, on its own setup (`experiments.setups.labelled`), with a runner
    runner(setup, **options) -> {"cells", "timings", "settings", "diagnostics"}; the note explains
    why the descriptor options do not apply to it. baselines: the methods beside the closed form that a
    run may choose among (`--baselines`, the runner's and slow part's `baselines=` option; a slow
    baseline's budget is an option of its own, e.g. negation's `ascent_steps`).
    """

    name: str
    runner: Callable[..., list[dict]]
    reference: str
    title: str
    methods: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    columns: tuple[str, ...] = ("A",)
    column_labels: Mapping[str, str] = field(default_factory=dict)
    report: Callable[..., list[str]] = protocol_table
    fast_path: bool = True
    alpha: float | None = 0.5
    solve: SolveConfig = SolveConfig()
    slow_part: Callable[..., list[dict]] | None = None
    adapter_part: Callable[..., list[dict]] | None = None
    slow_jobs: Callable[..., list] | None = None
    adapter_jobs: Callable[..., list] | None = None
    jobs: Callable[..., list] | None = None
    adapter_title: str = ""
    options: tuple[str, ...] = ()  # keyword options the runner takes (run_experiments(options={name: {...}}))
    reports: bool = False  # the runner takes report= (a dict it fills with "timings" / "diagnostics") and log=
    solves: bool = True
    fine_tunes: bool = False
    standalone: str = ""
    baselines: tuple[str, ...] = ()  # methods a run may leave out (--baselines; default: all of them)

    def has_records(self, experiments) -> bool:
        """Whether a run's experiment names (a cell's "experiment") hold this protocol's own records."""
        return any(e == self.name or (e.startswith(f"{self.name}/") and e != f"{self.name}/adapter") for e in experiments)


class Registry(Mapping[str, Protocol]):
    """Protocols by name, in registration order; refuses duplicate names."""

    def __init__(self, protocols=()):
        self._entries: dict[str, Protocol] = {}
        for protocol in protocols:
            self.register(protocol)

    def register(self, protocol: Protocol) -> Protocol:
        if not isinstance(protocol, Protocol):
            raise InvalidInputError(f"the registry holds Protocol entries; got {type(protocol).__name__}")
        if protocol.name in self._entries:
            raise InvalidInputError(f"an experiment named {protocol.name!r} is already registered")
        self._entries[protocol.name] = protocol
        return protocol

    def __getitem__(self, name: str) -> Protocol:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def methods(self, experiment: str) -> tuple[str, ...]:
        """The table order of the methods in records of `experiment` ("NAME" or "NAME/adapter")."""
        name, _, part = experiment.partition("/")
        return ADAPTER_METHODS if part == "adapter" else self._entries[name].methods

    def label(self, method: str) -> str:
        """The table label of `method` (its own name when no entry labels it)."""
        for protocol in self._entries.values():
            if method in protocol.labels:
                return protocol.labels[method]
        return SHARED_LABELS.get(method, method)

    def taking(self, predicate: Callable[[Protocol], bool]) -> list[str]:
        """The names of the entries `predicate` holds for, in registration order."""
        return [name for name, protocol in self._entries.items() if predicate(protocol)]


TWO_TASKS = {"A": "task A", "B": "task B"}

PROTOCOLS = Registry([
    Protocol("addition", addition, "method.md §1.5, two-task addition across models (3,360 cells), alpha 0.5",
             "Two-task addition (accuracy %, mean over cells)",
             ("zero_shot", "random", "single_a", "single_b", "closed_form", "consensus", "oracle"),
             {"random": "random descriptor", "single_a": "single A only", "single_b": "single B only",
              "oracle": "oracle (target's own descriptors)"},
             columns=("A", "B"), column_labels=TWO_TASKS, alpha=0.5, adapter_part=addition_adapter, options=("sources",),
             reports=True, adapter_jobs=addition_adapter_jobs,
             adapter_title="Adapter route vs closed form, two-task addition, on the same cells"),
    Protocol("negation", negation, "method.md §1.5, negation at lambda = 1 (240 cells), c = -1, alpha 1",
             "Negation (accuracy %, mean over cells)",
             ("zero_shot", "closed_form", "consensus", "target_as_source", "gradient_ascent"),
             {"target_as_source": "target as its own source", "gradient_ascent": "gradient ascent (labelled)"},
             column_labels={"A": "negated task"}, alpha=1.0, slow_part=negation_gradient_ascent,
             slow_jobs=gradient_ascent_jobs, adapter_part=negation_adapter, adapter_jobs=negation_adapter_jobs,
             adapter_title="Adapter route vs closed form, negation, on the same cells",
             options=("sources", "baselines", "ascent_steps"), reports=True, baselines=NEGATION_BASELINES),
    Protocol("generalization", generalization, "method.md §1.5, held-out generalisation of a related group",
             "Generalisation to the held-out related task (accuracy %)",
             ("zero_shot", "one_operator", "two_one_source", "two_two_sources"),
             {"one_operator": "one operator", "two_one_source": "two operators, one source",
              "two_two_sources": "two operators, two sources"},
             column_labels={"A": "held-out task"}, alpha=0.5),
    Protocol("alpha", alpha_sweep, "method.md §1.5, strength alpha from 0.5 to 1 (gains vs control cost)",
             "Strength sweep (single-term cross-model addition)", ("zero_shot", "closed_form"), report=alpha_table,
             alpha=None),
    Protocol("weight_space", weight_space, "method.md §1.7, weight-space baselines (same architecture): plain transport, "
             "GradFix (Rinaldi et al. 2026, ICLR, arXiv 2510.09658), Theseus (Rinaldi et al. 2026, arXiv 2602.12952)",
             "Weight-space baselines (two-task addition on the transports' targets; closed form on the transport cells)",
             ("zero_shot", "task_arithmetic", "weight_transport", "gradfix", "theseus", "closed_form"),
             {"task_arithmetic": "task arithmetic within the model (alpha on val)",
              "weight_transport": "weight-space transport, same architecture (alpha on val)",
              "gradfix": "GradFix: transport masked by the target's gradient signs, 10 labelled images per class (alpha on val)",
              "theseus": "Theseus: transport through Procrustes maps of activations on the probes (alpha on val)"},
             columns=("A", "B"), column_labels=TWO_TASKS, fast_path=False, alpha=0.5, options=("val_size",), reports=True,
             fine_tunes=True),
    Protocol("orthoreg_sources", orthoreg_sources, "method.md §2's OrthoReg fine-tunes as the descriptor sources of §1.5's "
             "two-task addition across models, beside plain ones, alpha 0.5 (beyond both papers, issue 13)",
             "Two-task addition across models, plain vs OrthoReg descriptor sources (accuracy %, mean over cells)",
             ("zero_shot", "plain_sources", "plain_oracle", "orthoreg_sources", "orthoreg_oracle"),
             {"plain_sources": "closed form, plain sources", "plain_oracle": "oracle, plain (target's own)",
              "orthoreg_sources": "closed form, OrthoReg sources (lambda on val)",
              "orthoreg_oracle": "oracle, OrthoReg (target's own)"},
             columns=("A", "B"), column_labels=TWO_TASKS, report=orthoreg_sources_tables, alpha=0.5,
             options=("lambdas", "val_size"), reports=True, fine_tunes=True),
    Protocol("task_arithmetic", run_task_arithmetic, "method.md §2, weight-space task arithmetic per fine-tuning flavour, "
             "without and with OrthoReg (the OrthoReg paper's tables), per merge rule: the sum (Ilharco et al. 2023, "
             "arXiv 2212.04089), TIES (Yadav et al. 2023, arXiv 2306.01708), DARE (Yu et al. 2024, arXiv 2311.03099), "
             "ISO-C (Marczak et al. 2025, arXiv 2502.04959), TSV-M (Gargiulo et al. 2025, arXiv 2412.00081)",
             "Task arithmetic: addition and negation per flavour, plain and with OrthoReg",
             ("zero_shot", "full", "attention", "lora", "linear"), report=task_arithmetic_tables, fast_path=False,
             alpha=None, options=("flavours", "lambdas", "negation_flavours", "val_size", "recipe", "merges"), solves=False,
             fine_tunes=True, standalone="it chooses alpha on validation and fine-tunes its own task vectors",
             jobs=task_arithmetic_jobs),
])


def check_experiments(names, related_group=None, held_out=None, baselines=None) -> None:
    """Refuse experiment names that are unknown or repeated, and experiments the setup cannot run.

    related_group / held_out / baselines: the setup's, when known (None: not checked). generalization
    needs a related group and a held-out task; weight_space needs the setup's task vectors; a
    standalone experiment (task_arithmetic) runs alone.
    """
    names = list(names)
    unknown = [n for n in names if n not in PROTOCOLS]
    if unknown:
        raise InvalidInputError(f"unknown experiment(s) {', '.join(unknown)}; choose from {', '.join(PROTOCOLS)}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidInputError(f"experiment(s) {', '.join(repeated)} named more than once; name each once "
                                "(a repeat would count every cell twice)")
    alone = [n for n in names if PROTOCOLS[n].standalone]
    if alone and len(names) > 1:
        raise InvalidInputError(f"{alone[0]} fine-tunes and writes its own tables: run it alone (platonic experiment "
                                f"{alone[0]}), the other experiments in another run")
    if "generalization" in names and related_group is not None and not (related_group and held_out):
        raise InvalidInputError("generalization needs a related group of tasks and a held-out related task, and this "
                                "setup has none; in a YAML setup add related_group: [TASK, TASK] and held_out: TASK")
    if "weight_space" in names and baselines is not None and "task_vector" not in baselines:
        raise InvalidInputError("weight_space needs the setup's task vectors (baselines['task_vector']), which this "
                                "setup does not provide")
    if "orthoreg_sources" in names and baselines is not None and "finetunes" not in baselines:
        raise InvalidInputError("orthoreg_sources fine-tunes its own plain and OrthoReg sources through the fine-tune "
                                "cache, which this setup does not provide; run it on --setup world or toy")
