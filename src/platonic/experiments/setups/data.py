"""The data an experiment setup names, decoded the way every one of its models reads it.

Every data source is read through `platonic.data`: labels first, then only the rows used are decoded
(the probes, 30 per class from train, seed 42; the test split; controls, 10 per class, seed 42;
method.md §1.6). Images decode at the setup's largest `canonical_size`, sound at its models' clip length.
"""

from __future__ import annotations

import warnings

import torch

from ...data.probes import control_indices, first_per_class, probe_draw
from ...data.resolve import open_task
from ...errors import InvalidInputError
from ...progress import track
from ..engine import EvalSet, TaskSpec
from .schema import DataSetConfig, ExperimentConfig


def open_data_set(name: str, cfg: DataSetConfig):
    return open_task(name, cfg.data, cfg.template, cfg.classes, cfg.label_column)


def read_test_split(name: str, cfg: DataSetConfig, size: int, max_per_class: int | None, seconds: float | None = None,
              modality: str | None = None, models: str = "the setup's models") -> tuple[EvalSet, list[str], object]:
    """(the test split as an EvalSet (its first `max_per_class` images of each class, or all), class names,
    the TaskData). Images decode to (n, 3, size, size) uint8, sound to (n, T) float32 clips at 16 kHz
    (T from `seconds`, else the split's longest clip capped at 10 s); a split of another modality than
    the models' (`modality`, named `models` in the error; None: not checked) is refused."""
    task = open_data_set(name, cfg)
    test = task.split("test")
    _require(test, modality, models)
    prompts = task.prompts(test)
    rows = first_per_class(test.labels, len(prompts), max_per_class)
    images = decoded(test, rows, size, seconds, f"decoding {name} test {_items(test)}")
    return EvalSet(name, images, test.labels[rows], prompts), task.class_names(test), task


LAZY_ROWS = 20_000  # an evaluation set of more rows is kept lazy: decoded batch by batch, never whole


def decoded(split, rows, size: int, seconds: float | None, description: str):
    """The rows of `split` as (n, 3, size, size) uint8 images (or (n, T) clips), decoded now; or, past
    `LAZY_ROWS` rows, lazily (`LazyImages`: each pass decodes the batch it encodes), so a 100k-image split
    costs one batch of pixels in memory instead of 15 GB (150 KB per 224 x 224 image)."""
    if len(rows) > LAZY_ROWS:
        return split.subset(rows).lazy(size, seconds)
    return split.decode(rows, size, description=description, seconds=seconds)


def _require(split, modality: str | None, models: str) -> None:
    if modality is not None:
        split.require(modality, models)


def _items(split) -> str:
    return "clips" if split.modality == "audio" else "images"


def read_control(name: str, cfg: DataSetConfig, size: int, config: ExperimentConfig, seconds: float | None = None,
                 modality: str | None = None, models: str = "the setup's models") -> EvalSet:
    """A control: `control_per_class` images (or clips) of each class of its test split, seeded (method.md §1.6)."""
    task = open_data_set(name, cfg)
    split = task.control()
    _require(split, modality, models)
    prompts = task.prompts(split)
    rows = control_indices(split.labels, len(prompts), config.control_per_class, config.control_seed)
    images = decoded(split, rows, size, seconds, f"decoding control {name}")
    return EvalSet(name, images, split.labels[rows], prompts)


def read_task(name: str, cfg: DataSetConfig, size: int, config: ExperimentConfig, seconds: float | None = None,
          modality: str | None = None, models: str = "the setup's models") -> tuple[TaskSpec, tuple]:
    """The task's spec (probes from train, test, val if present) and its labelled train split, as
    (LazyImages (n, 3, size, size) or LazyClips (n, T) that decode on indexing, labels (n,))."""
    test, folders, task = read_test_split(name, cfg, size, config.max_test_per_class, seconds, modality, models)
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
        tasks[name], train[name] = read_task(name, cfg, size, config, **form)
    controls = {name: read_control(name, cfg, size, config, **form) for name, cfg in control_configs.items()}
    return tasks, train, controls
