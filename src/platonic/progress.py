"""Progress bars (rich) that can be silenced: every long loop goes through `track`; `LineProgress` prints
one line per finished step where output is not a terminal (logs), where a rich bar shows nothing."""

from __future__ import annotations

import os
import sys
import time
from typing import Iterable, TypeVar

T = TypeVar("T")


def progress_enabled(default: bool = True) -> bool:
    """False when PLATONIC_QUIET is set to a non-empty value other than 0."""
    quiet = os.environ.get("PLATONIC_QUIET", "")
    return default and quiet in ("", "0")


def track(items: Iterable[T], description: str, enabled: bool = True, total: int | None = None) -> Iterable[T]:
    """Iterate `items`, showing a rich progress bar when enabled (and PLATONIC_QUIET is unset)."""
    if not progress_enabled(enabled):
        yield from items
        return
    from rich.progress import track as rich_track

    yield from rich_track(items, description=description, total=total, transient=True)


class StepProgress:
    """A progress bar over optimisation steps that shows the live loss; a no-op when disabled.

    with StepProgress(540, "fitting adapter") as bar:
        for step in range(540):
            ...
            bar.advance(loss=float(loss))
    """

    def __init__(self, total: int, description: str, enabled: bool = True):
        self.total, self.description = total, description
        self.enabled = progress_enabled(enabled)
        self._progress = self._task = None

    def __enter__(self) -> "StepProgress":
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn(), transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.total, loss="-")
        return self

    def advance(self, loss: float | None = None) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, loss="-" if loss is None else f"{loss:.4g}")

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()


def _is_terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class LineProgress:
    """Progress for logs: one line per finished step when output is not a terminal (a file, a pipe, CI).

    On a terminal it prints nothing (a rich bar shows the same); it is silenced like every bar
    (`enabled=False` or PLATONIC_QUIET). Lines read

        building world (full): 3/60 jobs (5%), pretrain vit-a done, 41 s
    """

    def __init__(self, total: int, description: str, enabled: bool = True, stream=None, unit: str = "jobs"):
        self.total, self.description, self.unit = total, description, unit
        self._stream = stream
        self.done = 0
        self.start = time.perf_counter()
        self.active = progress_enabled(enabled) and not _is_terminal(self.stream)

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stdout

    def note(self, text: str) -> None:
        """A line outside the count, e.g. a finished preparation stage."""
        if self.active:
            print(f"{self.description}: {text}, {time.perf_counter() - self.start:.0f} s", file=self.stream, flush=True)

    def step(self, what: str) -> None:
        """Count one finished step and say what it was."""
        self.done += 1
        if self.active:
            pct = 100 * self.done // max(self.total, 1)
            print(f"{self.description}: {self.done}/{self.total} {self.unit} ({pct}%), {what} done, "
                  f"{time.perf_counter() - self.start:.0f} s", file=self.stream, flush=True)
