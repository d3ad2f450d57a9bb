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
    sources:                                  # model -> task -> fine-tune (platonic.finetuned): a state dict
      b32: {cars: ft/b32-cars.safetensors}    #   (.safetensors, open_clip .bin / .pt), a peft LoRA directory,
      siglip: {cars: "hf:org/siglip-cars@0123abcd…"}   # a vision-only transformers checkpoint, hf:ORG/NAME[@REV]
    require_pinned: false                     # optional: refuse hub sources that name no commit
    finetune: {mode: lora, steps: 200, lr: 1e-3}   # optional: fine-tune the sources not listed above (cached:
                                              #   a second run with the same settings and data trains nothing);
                                              #   a task may change it: tasks: {sun397: {finetune: {epochs: 1}}}
    gradient_ascent: {steps: 20, lr: 1e-5}  # optional: the negation baseline's budget (loss negated)
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
(`experiments.finetune_cache.cached_finetune`), and read back on the next run instead of trained.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from ..errors import InvalidInputError
from ..finetune import GRADIENT_ASCENT, FinetuneConfig, finetune
from .finetune_cache import cached_finetune
from ..finetuned import require_pinned
from ..measurement import load_finetuned
from ..models import has_backend_prefix, load_model, resolve_spec_paths, spec_files
from ..progress import track
from ..task_vector import TaskVector
from ..data.probes import (CONTROL_PER_CLASS, CONTROL_SEED, PROBES_PER_CLASS, PROBE_SEED, control_indices,
                           first_per_class, probe_draw)  # the paper's draws (method.md §1.6)
from ..data.resolve import open_task
from ..data.sources import is_folder, missing_path, resolve_source_paths
from .diagnostics import descriptor_cosines
from .setup import EvalSet, ExperimentSetup, TaskSpec, measure_on_grids



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
    try:
        config = ExperimentConfig.model_validate(raw, context={"task_arithmetic": task_arithmetic})
    except ValidationError as exc:
        raise InvalidInputError(f"{path}: {_explain(exc)}") from None
    return _resolve(config, path.parent, task_arithmetic)


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
                from ..data.tasks import known_task

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


def _resolve(config: ExperimentConfig, root: Path, task_arithmetic: bool = False) -> ExperimentConfig:
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


# -- data ------------------------------------------------------------------------------------------
# Every data source is read through platonic.data: labels first, then only the rows used are decoded.

def _open(name: str, cfg: DataSetConfig):
    return open_task(name, cfg.data, cfg.template, cfg.classes, cfg.label_column)


def _eval_set(name: str, cfg: DataSetConfig, size: int, max_per_class: int | None, seconds: float | None = None,
              modality: str | None = None, models: str = "the setup's models") -> tuple[EvalSet, list[str], object]:
    """(the test split as an EvalSet (its first `max_per_class` images of each class, or all), class names,
    the TaskData). Images decode to (n, 3, size, size) uint8, sound to (n, T) float32 clips at 16 kHz
    (T from `seconds`, else the split's longest clip capped at 10 s); a split of another modality than
    the models' (`modality`, named `models` in the error; None: not checked) is refused."""
    task = _open(name, cfg)
    test = task.split("test")
    _require(test, modality, models)
    prompts = task.prompts(test)
    rows = first_per_class(test.labels, len(prompts), max_per_class)
    images = test.decode(rows, size, description=f"decoding {name} test {_items(test)}", seconds=seconds)
    return EvalSet(name, images, test.labels[rows], prompts), task.class_names(test), task


def _require(split, modality: str | None, models: str) -> None:
    if modality is not None:
        split.require(modality, models)


def _items(split) -> str:
    return "clips" if split.modality == "audio" else "images"


def _control_set(name: str, cfg: DataSetConfig, size: int, config: ExperimentConfig, seconds: float | None = None,
                 modality: str | None = None, models: str = "the setup's models") -> EvalSet:
    """A control: `control_per_class` images (or clips) of each class of its test split, seeded (method.md §1.6)."""
    task = _open(name, cfg)
    split = task.control()
    _require(split, modality, models)
    prompts = task.prompts(split)
    rows = control_indices(split.labels, len(prompts), config.control_per_class, config.control_seed)
    images = split.decode(rows, size, description=f"decoding control {name}", seconds=seconds)
    return EvalSet(name, images, split.labels[rows], prompts)


def _task(name: str, cfg: DataSetConfig, size: int, config: ExperimentConfig, seconds: float | None = None,
          modality: str | None = None, models: str = "the setup's models") -> tuple[TaskSpec, tuple]:
    """The task's spec (probes from train, test, val if present) and its labelled train split, as
    (LazyImages (n, 3, size, size) or LazyClips (n, T) that decode on indexing, labels (n,))."""
    test, folders, task = _eval_set(name, cfg, size, config.max_test_per_class, seconds, modality, models)
    train = task.split("train")
    if train is None:
        raise InvalidInputError(f"task {name!r} needs a train split for its probes: {task.source.text}/train")
    _require(train, modality, models)
    counts = torch.bincount(train.labels, minlength=len(folders))
    empty = [folders[i] for i in range(len(folders)) if counts[i] == 0]
    if empty:
        raise InvalidInputError(f"task {name!r}: class(es) {', '.join(empty)} have no train {_items(train)} in "
                                f"{task.source.text}, so they would get no probes and their prompt columns would "
                                "measure nothing; add some or remove the class from the test split")
    index = probe_draw(len(train), len(folders), config.probes_per_class, config.probe_seed)
    drawn = torch.bincount(train.labels[index], minlength=len(folders))
    unprobed = [folders[i] for i in range(len(folders)) if drawn[i] == 0]
    if unprobed:
        items = _items(train)
        warnings.warn(f"task {name!r}: the probe draw ({len(index)} of {len(train)} train {items}, seed "
                      f"{config.probe_seed}) holds no {items[:-1]} of class(es) {', '.join(unprobed)}, so the "
                      f"descriptor has no probe of them; raise probes_per_class or add train {items}", stacklevel=2)
    probes = train.decode(index, size, description=f"decoding {name} probes", seconds=seconds)
    val = None
    split = task.split("val")
    if split is not None:
        _require(split, modality, models)
        rows = first_per_class(split.labels, len(folders), config.max_test_per_class)
        val = EvalSet(f"{name}/val", split.decode(rows, size, seconds=seconds), split.labels[rows], test.prompts)
    return TaskSpec(name, test.prompts, probes, test, val), (train.lazy(size, seconds), train.labels)


def input_form(models: dict) -> tuple[str, int, float | None]:
    """(modality, image side S, clip seconds) every model of a setup is fed: S the largest `canonical_size`;
    seconds the one `canonical_seconds` the audio models name (None: all take any length; then each
    split's longest clip, capped at 10 s). Image-text and audio-text models in one setup, or audio models
    that name different lengths, are refused."""
    kinds = {name: m.modality for name, m in models.items()}
    if len(set(kinds.values())) > 1:
        listed = "; ".join(f"{k}-text: {', '.join(n for n, v in kinds.items() if v == k)}" for k in sorted(set(kinds.values())))
        raise InvalidInputError(f"the setup mixes modalities ({listed}); every model of one setup must read the same "
                                "probes: name image-text models or audio-text models, not both")
    lengths = {name: m.canonical_seconds for name, m in models.items() if getattr(m, "canonical_seconds", None)}
    if len(set(lengths.values())) > 1:
        raise InvalidInputError(f"the setup's audio models take clips of different lengths "
                                f"({', '.join(f'{n}: {s:g} s' for n, s in lengths.items())}); they must hear the same "
                                "probes: name models of one clip length")
    modality = next(iter(kinds.values()), "image")
    return modality, max(m.canonical_size for m in models.values()), next(iter(lengths.values()), None)


def read_data(models: dict, task_configs: dict, control_configs: dict, config: ExperimentConfig,
              progress: bool = True) -> tuple[dict, dict, dict]:
    """(tasks: name -> TaskSpec, train: name -> (lazy inputs, labels), controls: name -> EvalSet) of the
    given data sets, decoded in the form every model of `models` reads (`input_form`): images at the
    largest canonical size, or clips at the models' clip length; a split of the other modality is refused."""
    modality, size, seconds = input_form(models)
    first = next(iter(models))
    form = dict(seconds=seconds, modality=modality, models=f"model {first!r} ({models[first].spec})")
    tasks, train = {}, {}
    for name, cfg in track(list(task_configs.items()), description="reading task data", enabled=progress):
        tasks[name], train[name] = _task(name, cfg, size, config, **form)
    controls = {name: _control_set(name, cfg, size, config, **form) for name, cfg in control_configs.items()}
    return tasks, train, controls


# -- setup -----------------------------------------------------------------------------------------

def train_digest(images) -> str:
    """The data part of a cached fine-tune's key: the split's digest at the size its images (or clips) decode to."""
    return f"{images.split.digest()}@{images.key}" if hasattr(images, "split") else ""


def made_source(model, task: str, train: tuple, prompts, config: FinetuneConfig, on_miss=None):
    """The fine-tune of `model` on `task`'s (images, labels) that the `finetune:` block makes (cached)."""
    images, labels = train
    digest = train_digest(images)
    if not digest:  # not a split (no digest to key on): train, uncached
        return finetune(model, images, labels, prompts, config, progress=False)[0], False
    return cached_finetune(model, task, images, labels, prompts, config, digest, on_miss=on_miss)


def config_setup(config: ExperimentConfig | Path | str, progress: bool = True, device="cpu") -> ExperimentSetup:
    """Load the models, read the data, obtain every source and measure its descriptors.

    Sources made by the `finetune:` block come from the fine-tune cache when they are there
    (`made_source`); `setup.diagnostics["finetunes"]` says which were trained and which were read."""
    if not isinstance(config, ExperimentConfig):
        config = read_config(Path(config))
    check_files(config)  # before loading any model
    models = {name: load_model(spec, device=device) for name, spec in config.models.items()}
    tasks, train, controls = read_data(models, config.tasks, config.controls, config, progress)

    made: dict[tuple[str, str], TaskVector] = {}  # sources made with `finetune`, kept as weight deltas
    trained: dict[str, str] = {}  # "model/task" -> "trained" or "cached"

    def source(model: str, task: str):
        """The fine-tuned model of (model, task): listed ones are read from disk each time they are asked
        for (one in memory at a time); made ones are fine-tuned once and kept as their task vector."""
        listed = config.sources.get(model, {}).get(task)
        if listed is not None:
            return load_finetuned(models[model], listed)
        ft, hit = made_source(models[model], task, train[task], tasks[task].prompts,
                              task_finetune(config.finetune, task, config.tasks[task].finetune))
        trained[f"{model}/{task}"] = "cached" if hit else "trained"
        made[(model, task)] = TaskVector.from_models(models[model].module, ft.module)
        return ft

    descriptors, on_grid = measure_on_grids(models, tasks, source, progress, device)

    def task_vector(model: str, task: str) -> TaskVector:
        if (model, task) in made:
            return made[(model, task)]
        return TaskVector.from_models(models[model].module, source(model, task).module)

    def gradient_ascent(target: str, task: str):
        images, labels = train[task]
        return finetune(models[target], images, labels, tasks[task].prompts, config.gradient_ascent, progress=False)[0]

    return ExperimentSetup(config.name, models, tasks, controls, descriptors, related_group=tuple(config.related_group),
                           held_out=config.held_out, baselines={"gradient_ascent": gradient_ascent, "task_vector": task_vector},
                           diagnostics={**descriptor_cosines(list(models), list(tasks), on_grid),
                                        **({"finetunes": trained} if trained else {})})
