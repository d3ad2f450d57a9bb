"""A task or control by name and source: the data source, its splits and its class prompts.

    task = open_task("eurosat")                          # the registry's default source, names, template
    task = open_task("eurosat", "hf:./eurosat_copy")    # the registry's names and template, another copy
    task = open_task("pets", "data/pets", template="a photo of a {}, a type of pet.")
    train = task.split("train"); prompts = task.prompts(train)

Class names: the registry's (in label order) when `name` is registered, else the source's own (class
folders, ClassLabel names, a torchvision data set's `classes`; "_" read as a space); `classes` maps a
source label name to the name a prompt uses. Template: `template`, else the registry's, else
"a photo of a {}." for images and "this is a sound of {}." for sound (LAION CLAP's zero-shot prompt).
A registered task whose source counts another number of classes is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import InvalidInputError
from ..prompts import check_template, fill_template
from .sources import Split, control_split, parse_source, task_split
from .tasks import KNOWN_TASKS, KnownTask

DEFAULT_TEMPLATE = "a photo of a {}."
DEFAULT_AUDIO_TEMPLATE = "this is a sound of {}."  # LAION CLAP's zero-shot prompt


@dataclass
class TaskData:
    """A named labelled data set: its source (platonic.data.sources), its registry entry (or None),
    the template (None: the default of the split's modality, `template_for`) and the `classes` mapping
    (source label name -> prompt name)."""

    name: str
    source: object
    entry: KnownTask | None
    template: str | None
    classes: dict[str, str] | None = None

    def template_for(self, split: Split) -> str:
        """The template the prompts of `split` use: the task's, else the default of its modality."""
        if self.template is not None:
            return self.template
        return DEFAULT_AUDIO_TEMPLATE if split.modality == "audio" else DEFAULT_TEMPLATE

    def split(self, role: str) -> Split | None:
        """The task's "train", "test" or "val" split (`task_split`; val may be None), labels checked."""
        split = task_split(self.source, role)
        if split is not None:
            self._check_labels(split)
        return split

    def control(self) -> Split:
        """The control split (`control_split`), labels checked."""
        split = control_split(self.source)
        self._check_labels(split)
        return split

    def class_count(self, split: Split) -> int:
        if self.entry is not None:
            return len(self.entry.classes)
        if split.class_names is not None:
            return len(split.class_names)
        return int(split.labels.max()) + 1 if len(split) else 0

    def class_names(self, split: Split) -> list[str]:
        """Prompt names of the classes in label order."""
        own = list(split.class_names) if split.class_names is not None else None
        if self.entry is not None:
            if own is not None and len(own) != len(self.entry.classes):
                raise InvalidInputError(f"task {self.name!r}: {self.source.text} has {len(own)} classes, the registry's "
                                        f"{self.name} has {len(self.entry.classes)}; give the task another name (then "
                                        "its own class names are used) or a source of the same data set")
            base = list(self.entry.classes)
        elif own is not None:
            base = [n.replace("_", " ") for n in own]
        else:
            base = [str(i) for i in range(self.class_count(split))]
        if self.classes:
            keys = own if own is not None else [str(i) for i in range(len(base))]
            unknown = sorted(set(self.classes) - set(keys))
            if unknown:
                raise InvalidInputError(f"classes of {self.name!r} name class(es) {', '.join(unknown)} that "
                                        f"{self.source.text} does not have (it has: {', '.join(keys[:8])}"
                                        f"{' …' if len(keys) > 8 else ''})")
            base = [self.classes.get(k, b) for k, b in zip(keys, base)]
        return base

    def prompts(self, split: Split) -> tuple[str, ...]:
        """M prompts: the template filled with each class name."""
        return tuple(fill_template(self.template_for(split), n) for n in self.class_names(split))

    def _check_labels(self, split: Split) -> None:
        n = self.class_count(split)
        if len(split) and (int(split.labels.min()) < 0 or int(split.labels.max()) >= n):
            raise InvalidInputError(f"{self.source.text} ({split.name}) has labels outside 0..{n - 1} (e.g. "
                                    f"{int(split.labels[(split.labels < 0) | (split.labels >= n)][0])}); an unlabelled "
                                    "split cannot be a task's or control's")


def open_task(name: str, data=None, template: str | None = None, classes: dict[str, str] | None = None,
              label_column: str | None = None) -> TaskData:
    """The named data set (module docstring); data None: the registry's default source."""
    entry = KNOWN_TASKS.get(name) if name in KNOWN_TASKS else None
    if data is None:
        if entry is None:
            KNOWN_TASKS.get(name)  # the one-line error listing the known names
        data = entry.source
    prefer = entry.label_column if entry is not None and label_column is None else None
    source = parse_source(data, label_column, prefer) if str(data).startswith("hf:") else parse_source(data, label_column)
    chosen = template or (entry.template if entry is not None else None)
    if chosen is not None:
        check_template(chosen)
    return TaskData(name, source, entry, chosen, classes)


def split_counts(labels: torch.Tensor, n: int) -> torch.Tensor:
    """(n,) number of images of each class."""
    return torch.bincount(labels, minlength=n)
