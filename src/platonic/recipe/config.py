"""A recipe: one YAML file that says what to edit, how, and what to export (`platonic run RECIPE.yaml`).

    name: siglip-gets-eurosat
    models:                                   # as an experiment setup (docs/experiments.md)
      clip: hf:openai/clip-vit-base-patch32
      siglip: hf:google/siglip-base-patch16-224
    tasks: {eurosat: {}, dtd: {data: hf:tanganke/dtd}}      # registry names, or NAME: {data: SOURCE}
    controls: {cifar100: {}}
    sources: {clip: {eurosat: ft/clip-eurosat}}             # checkpoints / fine-tune directories, or
    finetune: {mode: lora, steps: 200}                      #   fine-tune the missing ones (cached)
    device: cuda                              # as --device, --dtype, --batch-size, --num-workers (the
    dtype: bfloat16                           #   command line's win where given): platonic.compute
    edits:
      - name: add                             # one cell per composition x target x source
        terms: ["eurosat:+1,dtd:+1"]          # a string, a mapping {eurosat: 1, dtd: 1}, or a list of them
        targets: [siglip]                     # model names, or all (default)
        sources: others                       # others (every other model, one cell each: cross-model),
                                              #   self (the target's own fine-tunes: the oracle), or names
        route: closed_form                    # closed_form | adapter
        alpha: 0.5                            # closed form; default 0.5, 1.0 when every term is negative
        solve: {mu_a: 1.0e-2, mu_b: 1.0e-6}   # closed form: platonic.SolveConfig (ridge weights, method.md
                                              #   §1.2; kind: anchored, anchor_images: DIR; rank, truncation)
        adapter: {max_steps: 540}             # adapter route: platonic.adapter.AdaptConfig fields
    exports:
      - {edit: add, target: siglip, source: clip, path: siglip-eurosat-dtd}   # inside the run directory;
                                              # terms: "..." picks a composition when the edit has several;
                                              # base_model: ORG/NAME for the card where the spec has none

Errors name the field and the fix in one line (`InvalidInputError`). Paths in the data, source and
model fields are read from the YAML file's folder, as in an experiment setup.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..adapt_config import AdaptConfig
from ..compute import Compute, DtypeName
from ..data.probes import CONTROL_PER_CLASS, CONTROL_SEED, PROBE_SEED, PROBES_PER_CLASS
from ..errors import InvalidInputError
from ..experiments.setups import (
    DataSetConfig,
    ExperimentConfig,
    check_files,
    check_task_finetunes,
    read_yaml,
    resolve_paths,
)
from ..finetuning.config import FinetuneConfig
from ..solve_config import SolveConfig
from ..terms import default_alpha, parse_terms

ROUTES = ("closed_form", "adapter")


class EditConfig(BaseModel):
    """One edit: compositions of tasks, applied to targets from sources by a route."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    terms: list[dict[str, float]]
    targets: list[str] | Literal["all"] = "all"
    sources: list[str] | Literal["others", "self"] = "others"
    route: Literal["closed_form", "adapter"] = "closed_form"
    alpha: float | None = Field(None, gt=0)
    solve: SolveConfig = SolveConfig()
    adapter: AdaptConfig = AdaptConfig()

    @field_validator("terms", mode="before")
    @classmethod
    def _compositions(cls, v):
        """A string "a:+1,b:-1", a mapping, or a list of them -> a list of {task: coefficient}."""
        items = v if isinstance(v, list) else [v]
        if not items:
            raise InvalidInputError("terms is empty; give e.g. 'eurosat:+1,dtd:+1' or a list of such compositions")
        out = []
        for item in items:
            if isinstance(item, str):
                out.append(parse_terms(item, "terms"))
            elif isinstance(item, dict) and item:
                out.append(item)
            else:
                raise InvalidInputError(f"terms: {item!r} is not a composition; write 'eurosat:+1,dtd:-1' or {{eurosat: 1}}")
        return out

    @field_validator("terms")
    @classmethod
    def _no_source_in_keys(cls, v):
        for comp in v:
            for key in comp:
                if "@" in key:
                    raise InvalidInputError(f"terms: {key!r}: a recipe names sources in the edit's `sources:` field, "
                                            f"not in the term; write {key.split('@')[0]!r}")
        return v

    @field_validator("alpha")
    @classmethod
    def _finite(cls, v):
        if v is not None and v == float("inf"):
            raise InvalidInputError("alpha must be a finite number > 0")
        return v

    def strength(self, composition: dict[str, float]) -> float:
        """The closed form's alpha for one composition: the edit's, else the paper's default for its signs."""
        return self.alpha if self.alpha is not None else default_alpha(composition)


class ExportConfig(BaseModel):
    """One edited model to write in its own library's format, inside the run directory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    edit: str
    target: str
    source: str | None = None
    terms: str | None = None
    path: str
    base_model: str | None = None

    @field_validator("path")
    @classmethod
    def _inside_the_run(cls, v: str) -> str:
        p = PurePosixPath(v)
        if not v or p.is_absolute() or ".." in p.parts or v.startswith("~"):
            raise InvalidInputError(f"exports: path {v!r} must be a relative path inside the run directory, e.g. "
                                    "exports/siglip-eurosat")
        if p.parts[0] in RESERVED:
            raise InvalidInputError(f"exports: path {v!r} is inside the run's own {p.parts[0]}/; choose another, "
                                    "e.g. exports/NAME")
        return v


RESERVED = ("descriptors", "banks", "adapters", "results.json", "tables.md", "recipe.yaml", "recipe.json")

COMMON = ("name", "models", "tasks", "controls", "sources", "finetune", "probes_per_class", "probe_seed",
          "control_per_class", "control_seed", "max_test_per_class", "require_pinned")


class Recipe(BaseModel):
    """The whole recipe (module docstring). The data and source fields are an experiment setup's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "recipe"
    models: dict[str, str]
    tasks: dict[str, DataSetConfig]
    controls: dict[str, DataSetConfig] = Field(default_factory=dict)
    sources: dict[str, dict[str, str]] = Field(default_factory=dict)
    finetune: FinetuneConfig | None = None
    probes_per_class: int = Field(PROBES_PER_CLASS, ge=1)
    probe_seed: int = PROBE_SEED
    control_per_class: int | None = Field(CONTROL_PER_CLASS, ge=1)
    control_seed: int = CONTROL_SEED
    max_test_per_class: int | None = Field(None, ge=1)
    require_pinned: bool = False
    device: str | None = None  # None: the GPU when there is one, else the CPU
    dtype: DtypeName | None = None  # autocast of the forward passes; None: float32
    batch_size: int | None = Field(None, ge=1)  # inputs per forward pass when encoding
    num_workers: int = Field(0, ge=0)  # DataLoader workers decoding lazily read splits
    edits: list[EditConfig] = Field(min_length=1)
    exports: list[ExportConfig] = Field(default_factory=list)

    @field_validator("tasks", "controls", mode="before")
    @classmethod
    def _registered_by_name(cls, v):
        return {k: ({} if d is None else d) for k, d in v.items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _consistent(self) -> "Recipe":
        names = [e.name for e in self.edits]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InvalidInputError(f"edits: name(s) {', '.join(twice)} are used twice; give every edit its own name")
        for i, edit in enumerate(self.edits):
            where = f"edits.{i} ({edit.name})"
            for field, value in (("targets", edit.targets), ("sources", edit.sources)):
                if isinstance(value, list):
                    unknown = [m for m in value if m not in self.models]
                    if unknown:
                        raise InvalidInputError(f"{where}.{field}: unknown model(s) {', '.join(unknown)}; models: "
                                                f"{', '.join(self.models)}")
            for comp in edit.terms:
                unknown = [t for t in comp if t not in self.tasks]
                if unknown:
                    raise InvalidInputError(f"{where}.terms: unknown task(s) {', '.join(unknown)}; add them under tasks "
                                            f"(known: {', '.join(self.tasks)})")
            if edit.route == "adapter" and edit.alpha is not None:
                raise InvalidInputError(f"{where}.alpha: the adapter route has no alpha (its strength is in the "
                                        "coefficients of terms); remove alpha or use route: closed_form")
            if not self.cells_of(edit):
                raise InvalidInputError(f"{where}.sources: no (target, source) pair: with sources: others every target "
                                        "needs another model; write sources: self (the target's own fine-tunes) or add models")
        check_task_finetunes(self.tasks, self.controls, self.finetune)
        missing = sorted({f"{s}/{t}" for s, t in self.needed_sources() if t not in self.sources.get(s, {})})
        if missing and self.finetune is None:
            raise InvalidInputError(f"no fine-tuned source for {', '.join(missing)}: list each under sources, or add a "
                                    "`finetune:` block to fine-tune them on the task's train split")
        for i, export in enumerate(self.exports):
            self.export_cell(export, f"exports.{i}")
        paths = [e.path for e in self.exports]
        twice = sorted({p for p in paths if paths.count(p) > 1})
        if twice:
            raise InvalidInputError(f"exports: path(s) {', '.join(twice)} are used twice; give every export its own path")
        return self

    def compute(self, device: str | None = None, dtype: str | None = None, batch_size: int | None = None,
                num_workers: int | None = None) -> Compute:
        """The recipe's device, dtype, batch_size and num_workers, each replaced by the argument where given (the
        command line's --device, ...); a device not here is a one-line error."""
        return Compute.parse(device or self.device, dtype or self.dtype, batch_size or self.batch_size,
                             num_workers or self.num_workers, where="")

    # -- the cells an edit makes ---------------------------------------------------------------------
    def targets_of(self, edit: EditConfig) -> list[str]:
        return list(self.models) if edit.targets == "all" else list(edit.targets)

    def sources_of(self, edit: EditConfig, target: str) -> list[str]:
        if edit.sources == "others":
            return [m for m in self.models if m != target]
        if edit.sources == "self":
            return [target]
        return list(edit.sources)

    def cells_of(self, edit: EditConfig) -> list[tuple[dict[str, float], str, str]]:
        """(composition, target, source) of every cell of `edit`."""
        return [(comp, target, source) for comp in edit.terms for target in self.targets_of(edit)
                for source in self.sources_of(edit, target)]

    def needed_sources(self) -> set[tuple[str, str]]:
        """Every (source model, task) whose descriptor some edit uses."""
        return {(source, task) for edit in self.edits for comp, _, source in self.cells_of(edit) for task in comp}

    def edit(self, name: str) -> EditConfig:
        for e in self.edits:
            if e.name == name:
                return e
        raise InvalidInputError(f"no edit named {name!r}; edits: {', '.join(e.name for e in self.edits)}")

    def export_cell(self, export: ExportConfig, where: str = "exports") -> tuple[EditConfig, dict[str, float], str, str]:
        """(edit, composition, target, source) of one export, or a one-line error naming the field to fix."""
        try:
            edit = self.edit(export.edit)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{where}.edit: {exc}") from None
        if export.target not in self.targets_of(edit):
            raise InvalidInputError(f"{where}.target: {export.target!r} is not a target of edit {edit.name!r} "
                                    f"(its targets: {', '.join(self.targets_of(edit))})")
        sources = self.sources_of(edit, export.target)
        source = export.source
        if source is None:
            if len(sources) != 1:
                raise InvalidInputError(f"{where}.source: edit {edit.name!r} has {len(sources)} sources for target "
                                        f"{export.target!r} ({', '.join(sources)}); name one")
            source = sources[0]
        elif source not in sources:
            raise InvalidInputError(f"{where}.source: {source!r} is not a source of edit {edit.name!r} for target "
                                    f"{export.target!r} (its sources: {', '.join(sources)})")
        if export.terms is None:
            if len(edit.terms) != 1:
                raise InvalidInputError(f"{where}.terms: edit {edit.name!r} has {len(edit.terms)} compositions; "
                                        "pick one, e.g. terms: 'eurosat:+1,dtd:+1'")
            composition = edit.terms[0]
        else:
            wanted = parse_terms(export.terms, f"{where}.terms")
            if wanted not in edit.terms:
                raise InvalidInputError(f"{where}.terms: {export.terms!r} is not a composition of edit {edit.name!r}")
            composition = wanted
        return edit, composition, export.target, source

    def summary(self) -> str:
        """One line: what the recipe names (models, tasks, controls, edits and their cells, exports)."""
        cells = sum(len(self.cells_of(e)) for e in self.edits)
        return (f"{len(self.models)} models, {len(self.tasks)} tasks, {len(self.controls)} controls, {len(self.edits)} "
                f"edits ({cells} cells), {len(self.exports)} exports")

    def check_models(self, where: str = "recipe") -> None:
        """Every model spec is well formed (nothing is loaded); an error names the recipe field."""
        from ..models import check_spec

        for name, spec in self.models.items():
            try:
                check_spec(spec)
            except InvalidInputError as exc:
                raise InvalidInputError(f"{where}: models.{name}: {exc}") from None

    def check_files(self) -> None:
        """Every path the recipe names exists (data folders, weights files, listed sources, and each edit's
        anchor pool), all missing ones named at once: `platonic run --check` and the run itself, before any
        model loads."""
        anchors = [f"anchor_images of edit {e.name!r} not found: {e.solve.anchor_images}" for e in self.edits
                   if e.solve.anchor_images is not None and not e.solve.anchor_images.exists()]
        try:
            check_files(self.experiment_config())
        except InvalidInputError as exc:
            raise InvalidInputError("; ".join([str(exc), *anchors])) from None
        if anchors:
            raise InvalidInputError(f"{len(anchors)} path(s) of the recipe do not exist: {'; '.join(anchors)} "
                                    "(relative paths are read from the recipe's folder)")

    def experiment_config(self) -> ExperimentConfig:
        """The models, data and sources as an experiment setup (for its readers and checks)."""
        data = {k: getattr(self, k) for k in COMMON}
        return ExperimentConfig.model_validate({k: v.model_dump() if hasattr(v, "model_dump") else v for k, v in data.items()}
                                               | {"tasks": {k: v.model_dump() for k, v in self.tasks.items()},
                                                  "controls": {k: v.model_dump() for k, v in self.controls.items()}},
                                               context={"task_arithmetic": True})


def _explain_recipe(exc: ValidationError) -> str:
    """pydantic's errors as "field.path: message" (our own checks name their field in the message)."""
    parts = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


SETUP_ONLY = ("related_group", "held_out", "gradient_ascent")  # an experiment setup's fields a recipe lacks


def parse_recipe(raw, where: str = "recipe", root: Path | None = None) -> Recipe:
    """Validate a recipe mapping; with `root`, its relative paths are read from there."""
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{where}: expected a mapping with models, tasks, edits (see `platonic run --help`)")
    if "edits" not in raw and "models" in raw:
        setup = [k for k in SETUP_ONLY if k in raw]
        raise InvalidInputError(f"{where} names no edits, so it is not a recipe"
                                + (f"; it is an experiment setup (it has {', '.join(setup)})" if setup else "")
                                + f": run it with `platonic experiment NAME --setup {where}`, or add edits: "
                                "(docs/recipes.md) to run it with `platonic run`")
    try:
        recipe = Recipe.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInputError(f"{where}: {_explain_recipe(exc)}") from None
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: {exc}") from None
    if root is None:
        return recipe
    resolved = resolve_paths(recipe.experiment_config(), root, task_arithmetic=True)
    edits = [e.model_copy(update={"solve": e.solve.model_copy(update={"anchor_images": Path(root) / e.solve.anchor_images})})
             if e.solve.anchor_images is not None and not e.solve.anchor_images.is_absolute() else e for e in recipe.edits]
    return recipe.model_copy(update={"edits": edits, **{k: getattr(resolved, k) for k in ("models", "tasks", "controls",
                                                                                          "sources")}})


def read_recipe(path) -> Recipe:
    """Read and validate a recipe YAML file; relative paths are read from its folder."""
    path = Path(path)
    return parse_recipe(read_yaml(path, "recipe"), str(path), path.parent)


def recipe_json(recipe: Recipe) -> dict:
    """The resolved recipe as plain JSON (what a run directory records)."""
    return recipe.model_dump(mode="json")
