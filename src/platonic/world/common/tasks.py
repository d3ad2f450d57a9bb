"""A task (or control) of a world: its class names, one prompt template, caption hints, domain and role."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """A classification task (or control set) of the world.

    classes: class names in label order; template: the one prompt template ("... {} ...");
    hints: per class, a partial description used in pre-training captions (names a group, not the class);
    domain: what kind of picture it is, used in generic captions; role: "task" or "control".
    """

    name: str
    classes: tuple[str, ...]
    template: str
    hints: tuple[str, ...]
    domain: str
    source: str
    role: str = "task"

    @property
    def prompts(self) -> list[str]:
        return [self.template.format(c) for c in self.classes]

    @property
    def n_classes(self) -> int:
        return len(self.classes)
