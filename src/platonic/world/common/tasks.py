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


def caption_pools(task: Task, naming: tuple[str, ...], hinting: tuple[str, ...]) -> dict[str, list[list[str]]]:
    """Per class: 'name' captions (the task's prompt, then `naming` phrasings of the class name `{c}`) and 'hint'
    captions (`hinting` phrasings of its hint `{h}`); both may name the task's `{domain}`. Only one of the naming
    phrasings is the task's prompt template."""
    name = [[task.template.format(c), *(p.format(c=c, domain=task.domain) for p in naming)] for c in task.classes]
    hint = [[p.format(h=h, domain=task.domain) for p in hinting] for h in task.hints]
    return {"name": name, "hint": hint}


def caption_vocabulary(sets: dict[str, Task], generic: tuple[str, ...], pools) -> list[str]:
    """Every caption string pre-training may use, sorted (the text cache is keyed by this list): the generic
    captions, every set's `pools(task)` and its prompts."""
    out = set(generic)
    for task in sets.values():
        for captions in pools(task).values():
            for caps in captions:
                out.update(caps)
        out.update(task.prompts)
    return sorted(out)
