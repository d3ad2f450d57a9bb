"""The paper's tasks and controls by name: class names, the one template, a default data source.

    from platonic.data.tasks import KNOWN_TASKS, known_task
    known_task("eurosat").prompts()   # 10 prompts "a centered satellite photo of annual crop land." ...

`--task eurosat` (or `tasks: {eurosat: {}}`) uses the entry's default source; `--task eurosat=SOURCE`
(or `tasks: {eurosat: {data: SOURCE}}`) another source of the same data set, whose labels must count as
many classes. Templates are the reference code's (method.md §1.6). Default sources are Hugging Face
hub copies (downloaded by `datasets` on first use): the ones the reference code reads for Cars,
RESISC45, SUN397 and ImageNet; the others are hub copies of the torchvision data sets the reference
code reads (give `torchvision:NAME@ROOT` for those; a torchvision EuroSAT has one split, which is cut
80 / 20 with seed 42, as the reference code does).

A registry refuses a second entry of the same name (`TaskRegistry.register`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from ..errors import InvalidInputError
from ..prompts import fill_template
from . import classnames as cn


@dataclass(frozen=True)
class KnownTask:
    """One registered data set: its class names in label order and the paper's single template.

    kind: "task" (probes from train, accuracy on test) or "control" (10 test images per class).
    label_column: the Hugging Face column that holds the labels, where the default source has several.
    """

    name: str
    title: str
    classes: tuple[str, ...]
    template: str
    source: str
    kind: Literal["task", "control"] = "task"
    label_column: str | None = None

    def prompts(self) -> list[str]:
        """M = len(classes) prompts: the template with each class name in its `{}`."""
        return [fill_template(self.template, c) for c in self.classes]


class TaskRegistry:
    """Name -> KnownTask; `register` refuses a name that is taken (peft's register_peft_method)."""

    def __init__(self):
        self._entries: dict[str, KnownTask] = {}
        self._lazy: dict[str, Callable[[], KnownTask]] = {}

    def register(self, task: KnownTask | Callable[[], KnownTask], name: str | None = None) -> None:
        """Add an entry (or a callable that builds it on first use, under `name`)."""
        key = task.name if isinstance(task, KnownTask) else name
        if not key:
            raise InvalidInputError("a lazily built registry entry needs its name")
        if key in self._entries or key in self._lazy:
            raise InvalidInputError(f"a task named {key!r} is registered already; choose another name")
        if isinstance(task, KnownTask):
            self._entries[key] = task
        else:
            self._lazy[key] = task

    def names(self) -> list[str]:
        return sorted([*self._entries, *self._lazy])

    def __contains__(self, name: str) -> bool:
        return name in self._entries or name in self._lazy

    def get(self, name: str) -> KnownTask:
        """The entry of `name`; an unknown name is a one-line error listing the known ones."""
        if name in self._lazy:
            self._entries[name] = self._lazy.pop(name)()
        if name not in self._entries:
            raise InvalidInputError(f"unknown task {name!r}; the registry knows {', '.join(self.names())} (or give "
                                    f"{name}=SOURCE: an image folder, hf:ORG/NAME or torchvision:NAME@ROOT)")
        return self._entries[name]


KNOWN_TASKS = TaskRegistry()

_clean = lambda names: tuple(cn.clean_class_name(n) for n in names)  # noqa: E731

for _task in (
    KnownTask("eurosat", "EuroSAT", cn.EUROSAT, "a centered satellite photo of {}.", "hf:tanganke/eurosat"),
    KnownTask("dtd", "DTD", cn.DTD, "a photo of a {} texture.", "hf:tanganke/dtd"),
    KnownTask("gtsrb", "GTSRB", cn.GTSRB, "a photo of a {} traffic sign.", "hf:tanganke/gtsrb"),
    KnownTask("mnist", "MNIST", cn.DIGITS, "a photo of the number {}.", "hf:ylecun/mnist"),
    KnownTask("svhn", "SVHN", cn.DIGITS, "a photo of the number {}.", "hf:ufldl-stanford/svhn:cropped_digits"),
    KnownTask("resisc45", "RESISC45", cn.RESISC45, "a satellite photo of {}.", "hf:timm/resisc45"),
    KnownTask("cars", "Stanford Cars", _clean(cn.STANFORD_CARS_LABELS), "a photo of a {}.", "hf:tanganke/stanford_cars"),
    KnownTask("sun397", "SUN397", _clean(cn.SUN397_LABELS), "a photo of a {}.", "hf:tanganke/sun397"),
    KnownTask("cifar100", "CIFAR-100", _clean(cn.CIFAR100_LABELS), "a photo of a {}.", "hf:uoft-cs/cifar100",
              kind="control", label_column="fine_label"),
):
    KNOWN_TASKS.register(_task)
KNOWN_TASKS.register(lambda: KnownTask("imagenet", "ImageNet", cn.imagenet_classnames(), "a photo of a {}.",
                                       "hf:mrm8488/ImageNet1K-val", kind="control"), name="imagenet")

PAPER_TASKS = ("eurosat", "dtd", "cars", "gtsrb", "mnist", "resisc45", "svhn", "sun397")  # the reference code's order
PAPER_CONTROLS = ("cifar100", "imagenet")


def known_task(name: str) -> KnownTask:
    """The registry entry of `name` (one-line error naming the known ones)."""
    return KNOWN_TASKS.get(name)
