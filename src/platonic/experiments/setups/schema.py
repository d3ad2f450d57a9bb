"""Experiments on models the user names: a YAML file (or command-line options) -> ExperimentSetup.

    name: clip-vs-siglip
    models:                                   # name -> model spec (see platonic.models.load_model)
      b32: open_clip:ViT-B-32/openai
      siglip: hf:google/siglip-base-patch16-224
    tasks:                                    # name -> data source (platonic.data.sources):
      eurosat: {data: hf:tanganke/eurosat}    #   a registered task (platonic.data.tasks): its names, template
      dtd: {}                                 #   a registered task from its default source
      pets: {data: data/pets, template: "a photo of a {}, a type of pet.", classes: {tabby: "tabby cat"}}
      digits: {data: "torchvision:MNIST@data/mnist"}    # image folder DIR/{train,test[,val]}/CLASS/*.png,
                                              #   hf:ORG/NAME[:CONFIG][@REV], hf:DIR, torchvision:NAME@ROOT;
                                              #   audio-text models: DIR/{train,test}/CLASS/*.wav, hf: with Audio
    controls:                                 # broad sets no probe or fine-tune uses (10 per class, seed 42)
      cifar100: {}
      objects: {data: data/objects}           #   DIR[/test]/CLASS/*.png
    sources:                                  # model -> task -> fine-tune (platonic.finetuning.sources): a state dict
      b32: {cars: ft/b32-cars.safetensors}    #   (.safetensors, open_clip .bin / .pt), a peft LoRA directory,
      siglip: {cars: "hf:org/siglip-cars@0123abcd…"}   # a vision-only transformers checkpoint, hf:ORG/NAME[@REV]
    require_pinned: false                     # optional: refuse hub sources that name no commit
    finetune: {mode: lora, steps: 200, lr: 1e-3}   # optional: fine-tune the sources not listed above (cached:
                                              #   a second run with the same settings and data trains nothing);
                                              #   a task may change it: tasks: {sun397: {finetune: {epochs: 1}}}
    gradient_ascent: {steps: 20, lr: 1e-5}  # optional: the negation baseline's budget (loss negated)
    task_vectors: {steps: 2000, batch_size: 128, warmup_fraction: 0.25}   # optional: task_arithmetic's fine-tunes
                                              #   (experiments.engine.TaskVectorRecipe; default 64 steps of 64
                                              #   at lr 1e-3; --steps replaces its steps)
    related_group: [cars, dtd]                # optional: the generalisation experiment's related tasks
    held_out: aircraft                        #   and its held-out related task
    probes_per_class: 30                      # probes: 30 per class from train, seed 42 (method.md §1.6)
    control_per_class: 10                     # control images: 10 per class from test, seed 42 (null: all)

Relative paths are read from the YAML file's folder: data folders, source files and the local paths in
model specs (open_clip:ARCH@FILE, a transformers directory); every one of them is checked before any
model loads. Class names and template of a registered task (eurosat, dtd, gtsrb, mnist, svhn, resisc45,
cars, sun397, cifar100, imagenet) are the registry's; other tasks' class names come from the source (class
folders, ClassLabel names; underscores read as spaces) unless `classes` maps label names to names. Only
the probes and the evaluated images are decoded (docs/data.md). Models of one setup are all image-text
(images decode to the largest `canonical_size`) or all audio-text (sound decodes to canonical clips at the
models' one `canonical_seconds`, else each split's longest clip capped at 10 s; `input_form`). Every (model, task) needs a source,
listed under `sources` or made with `finetune` on the task's train split. Made fine-tunes are cached as
task vectors under $PLATONIC_CACHE/finetunes, keyed by the model's fingerprint, the task, the mode, the
OrthoReg lambda, the whole `finetune:` block and the train split's data digest
(`experiments.engine.finetune_cache.cached_finetune`), and read back on the next run instead of trained.
"""
from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from ...data.probes import CONTROL_PER_CLASS, CONTROL_SEED, PROBE_SEED, PROBES_PER_CLASS
from ...data.sources import is_folder, missing_path, resolve_source_paths
from ...errors import InvalidInputError
from ...finetuning import GRADIENT_ASCENT, FinetuneConfig, require_pinned
from ...models import has_backend_prefix, resolve_spec_paths, spec_files
from ..engine import TaskVectorRecipe


class DataSetConfig(BaseModel):
    """One labelled data set (platonic.data.sources) and how its classes are prompted.

    data: an image (or sound) folder (a Path), "hf:..." or "torchvision:..."; None: the registry's default source.
    template / classes: override the registry's (or the default "a photo of a {}." and the source's names).
    """

    model_config = ConfigDict(extra="forbid")

    data: Path | str | None = None
    template: str | None = None
    classes: dict[str, str] | None = None  # source label name (e.g. class folder) -> class name in the prompts
    label_column: str | None = None  # hf: the column holding the labels (default: "label" or the only ClassLabel)
    finetune: dict | None = None  # this task's changes to the `finetune:` block, e.g. {epochs: 1} (`task_finetune`)

    @field_validator("data", mode="before")
    @classmethod
    def _folder_is_a_path(cls, v):
        return Path(v) if isinstance(v, str) and is_folder(v) else v

    @field_validator("template")
    @classmethod
    def _one_slot(cls, v: str | None) -> str | None:
        if v is not None and v.count("{}") != 1:
            raise InvalidInputError(f"template {v!r} must contain exactly one '{{}}' for the class name")
        return v


def task_finetune(block: FinetuneConfig | None, task: str, override: dict | None) -> FinetuneConfig | None:
    """The `finetune:` block with task `task`'s own changes (`tasks: {sun397: {finetune: {epochs: 1}}}`).

    A length given for the task (steps or epochs) replaces the block's, whichever of the two it gave.
    """
    if not override:
        return block
    if block is None:
        raise InvalidInputError(f"tasks.{task}.finetune changes the `finetune:` block, which is missing; add one")
    fields = block.model_dump(exclude_unset=True)
    for length, other in (("steps", "epochs"), ("epochs", "steps")):
        if length in override:
            fields.pop(other, None)
    try:
        return FinetuneConfig(**{**fields, **override})
    except ValidationError as exc:
        raise InvalidInputError(f"tasks.{task}.finetune: " + "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: "
                                                                     f"{e['msg']}" for e in exc.errors())) from None


def check_task_finetunes(tasks: dict, controls: dict, block: FinetuneConfig | None) -> None:
    """Every task's `finetune:` changes apply to the block; controls are never fine-tuned on."""
    for name, cfg in controls.items():
        if cfg.finetune:
            raise InvalidInputError(f"controls.{name}.finetune: nothing is fine-tuned on a control; remove it")
    for name, cfg in tasks.items():
        task_finetune(block, name, cfg.finetune)


class ExperimentConfig(BaseModel):
    """A whole experiment setup on user-named models (the YAML schema in the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    name: str = "custom"
    models: dict[str, str]
    tasks: dict[str, DataSetConfig]
    controls: dict[str, DataSetConfig] = Field(default_factory=dict)
    sources: dict[str, dict[str, str]] = Field(default_factory=dict)
    finetune: FinetuneConfig | None = None
    gradient_ascent: FinetuneConfig = GRADIENT_ASCENT
    task_vectors: TaskVectorRecipe | None = None  # task_arithmetic's fine-tunes (None: the recipe's defaults)
    related_group: list[str] = Field(default_factory=list)
    held_out: str | None = None
    probes_per_class: int = Field(PROBES_PER_CLASS, ge=1)
    probe_seed: int = PROBE_SEED
    control_per_class: int | None = Field(CONTROL_PER_CLASS, ge=1)
    control_seed: int = CONTROL_SEED
    max_test_per_class: int | None = Field(None, ge=1)
    require_pinned: bool = False  # every hub source names a commit (hf:ORG/NAME@COMMIT)

    @field_validator("tasks", "controls", mode="before")
    @classmethod
    def _registered_by_name(cls, v):
        """`tasks: {eurosat: }` (null) is a registered task from its default source."""
        return {k: ({} if d is None else d) for k, d in v.items()} if isinstance(v, dict) else v

    @field_validator("gradient_ascent")
    @classmethod
    def _ascend(cls, v: FinetuneConfig) -> FinetuneConfig:
        return v if v.ascent else v.model_copy(update={"ascent": True})  # it is the negation baseline

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> "ExperimentConfig":
        own_finetunes = bool(info.context and info.context.get("task_arithmetic"))  # it fine-tunes; one model will do
        if own_finetunes and not self.models:
            raise InvalidInputError("name at least one model")
        if len(self.models) < 2 and not own_finetunes:
            raise InvalidInputError(f"name at least two models (cross-model experiments need a source and a target); got {len(self.models)}")
        if not self.tasks:
            raise InvalidInputError("name at least one task")
        for model, per_task in self.sources.items():
            if model not in self.models:
                raise InvalidInputError(f"sources names model {model!r}, which is not under models ({', '.join(self.models)})")
            unknown = [t for t in per_task if t not in self.tasks]
            if unknown:
                raise InvalidInputError(f"sources of {model!r} name unknown task(s) {', '.join(unknown)}; tasks: {', '.join(self.tasks)}")
        missing = [f"{m}/{t}" for m in self.models for t in self.tasks if t not in self.sources.get(m, {})]
        if missing and self.finetune is None and not own_finetunes:
            raise InvalidInputError(f"no fine-tuned source for {', '.join(missing)}: list each under sources, or add a "
                             "`finetune:` block to fine-tune the missing ones on the task's train split")
        related = [t for t in [*self.related_group, *([self.held_out] if self.held_out else [])] if t not in self.tasks]
        if related:
            raise InvalidInputError(f"related_group / held_out name unknown task(s) {', '.join(related)}")
        if self.held_out in self.related_group:
            raise InvalidInputError(f"held_out task {self.held_out!r} must not be in related_group")
        check_task_finetunes(self.tasks, self.controls, self.finetune)
        return self


RECIPE_ONLY = ("edits", "exports")  # a recipe's fields (docs/recipes.md) that a setup does not have


def read_yaml(path: Path, what: str):
    """The parsed YAML of `path` (a setup or a recipe, named `what` in errors); one-line errors for a file
    that cannot be read, is not UTF-8, or is not YAML."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise InvalidInputError(f"cannot read the {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"the {what} {path} is not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"{path} is not valid YAML: {' '.join(str(exc).split())}") from None


def read_config(path: Path, task_arithmetic: bool = False) -> ExperimentConfig:
    """Parse and validate a YAML setup; relative data / source paths are taken from the file's folder.

    task_arithmetic: for the task-arithmetic experiment, which fine-tunes itself (one model suffices,
    no sources needed)."""
    path = Path(path)
    raw = read_yaml(path, "experiment setup")
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{path}: expected a mapping with models, tasks, sources (see `platonic experiment --help`)")
    recipe_fields = [k for k in RECIPE_ONLY if k in raw]
    if recipe_fields:
        raise InvalidInputError(f"{path} is a recipe (it has {', '.join(recipe_fields)}), not an experiment setup: run it "
                                f"with `platonic run {path}`, or remove {', '.join(recipe_fields)} to use it as --setup")
    try:
        config = ExperimentConfig.model_validate(raw, context={"task_arithmetic": task_arithmetic})
    except ValidationError as exc:
        raise InvalidInputError(f"{path}: {_explain(exc)}") from None
    return resolve_paths(config, path.parent, task_arithmetic)


def config_from_options(models: list[str], tasks: list[str], controls: list[str], sources: list[str],
                        base: ExperimentConfig | None = None, task_arithmetic: bool = False) -> ExperimentConfig:
    """A config from command-line options NAME=VALUE (sources: MODEL/TASK=FINETUNE), added to `base`."""
    data = base.model_dump() if base is not None else {"name": "command line", "models": {}, "tasks": {}}
    for item in models:
        name, value = _pair(item, "--model NAME=SPEC")
        data["models"][name] = value
    for option, key in ((tasks, "tasks"), (controls, "controls")):
        for item in option:
            if "=" not in item:  # a registered task from its default source
                from ...data.tasks import known_task

                known_task(item)
                data.setdefault(key, {})[item] = {}
                continue
            name, value = _pair(item, f"--{key[:-1]} NAME[=SOURCE]")
            data.setdefault(key, {})[name] = {"data": value}
    for item in sources:
        name, value = _pair(item, "--source MODEL/TASK=FINETUNE")
        model, slash, task = name.partition("/")
        if not slash:
            raise InvalidInputError(f"--source {item!r}: write MODEL/TASK=FINETUNE")
        data.setdefault("sources", {}).setdefault(model, {})[task] = value
    try:
        return ExperimentConfig.model_validate(data, context={"task_arithmetic": task_arithmetic})
    except ValidationError as exc:
        raise InvalidInputError(_explain(exc)) from None


def _pair(item: str, form: str) -> tuple[str, str]:
    name, eq, value = item.partition("=")
    if not eq or not name or not value:
        raise InvalidInputError(f"{item!r}: write {form}")
    return name, value


def _explain(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'setup'}: {e['msg']}" for e in exc.errors())


def resolve_paths(config: ExperimentConfig, root: Path, task_arithmetic: bool = False) -> ExperimentConfig:
    """Relative paths read from `root` (the YAML file's folder): data folders, source files, and the
    local paths in model specs (open_clip:ARCH@FILE, a transformers directory). Hub names, tags,
    seeds and absolute paths are unchanged."""
    def at(p) -> Path:
        p = Path(p).expanduser()
        return p if p.is_absolute() else root / p

    data = config.model_dump()
    for key in ("tasks", "controls"):
        for d in data[key].values():
            if d["data"] is not None:
                d["data"] = at(d["data"]) if isinstance(d["data"], Path) else resolve_source_paths(d["data"], root)
    data["models"] = {name: resolve_spec_paths(spec, root) for name, spec in data["models"].items()}
    for per_task in data["sources"].values():
        for task, value in per_task.items():
            per_task[task] = resolve_spec_paths(value, root) if has_backend_prefix(value) else str(at(value))
    return ExperimentConfig.model_validate(data, context={"task_arithmetic": task_arithmetic})


def check_files(config: ExperimentConfig) -> None:
    """Every folder and file the setup names exists, and with `require_pinned` every hub source names a
    commit: checked before any model is loaded.

    Data folders (and the local paths of hf: / torchvision: sources), the weights files of open_clip:ARCH@FILE models, and the listed sources that are
    files or folders (not model specs); all missing ones are named at once.
    """
    data = [(name, cfg.data) for name, cfg in [*config.tasks.items(), *config.controls.items()] if cfg.data is not None]
    missing = [f"data folder of {name!r} not found: {d}" if isinstance(d, Path) else f"data of {name!r}: {missing_path(d)} ({d})"
               for name, d in data if missing_path(d)]
    missing += [f"weights of model {name!r} not found: {path}" for name, spec in config.models.items()
                if spec.startswith("open_clip:") for path in spec_files(spec) if not path.exists()]
    missing += [f"source {model}/{task} not found: {value}" for model, per_task in config.sources.items()
                for task, value in per_task.items() if not has_backend_prefix(value) and not Path(value).exists()]
    if missing:
        raise InvalidInputError(f"{len(missing)} path(s) of the setup do not exist: {'; '.join(missing)} "
                                "(relative paths are read from the YAML file's folder)")
    if config.require_pinned:
        for model, per_task in config.sources.items():
            for task, value in per_task.items():
                require_pinned(value, f"source {model}/{task}", "require_pinned: true")
