"""The source kinds of a world and which of them a build holds: the COMPLETE marker, and adding a kind later.

A world build makes the pre-trained models and the sources of the kinds asked for ("full", what the demo and the
experiments use by default; "lora"); its COMPLETE marker names those kinds, and a kind asked for later is added to
the built world on first use (`add_sources`), with the weights it would have had if built together (a job seeds
each kind by its place in `KINDS`).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import as_completed
from pathlib import Path
from typing import Callable, Sequence

from ...errors import InvalidInputError
from ...progress import LineProgress, track
from .jobs import build_workers, worker_pool, write_build_record

KINDS = ("full", "lora")


def check_kinds(kinds) -> tuple[str, ...]:
    """`kinds` as a tuple in KINDS order if every one is a source kind; else raise naming the kinds."""
    kinds = tuple(kinds)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise InvalidInputError(f"source kinds {', '.join(map(repr, unknown)) or '(none)'}: use {' and/or '.join(KINDS)}")
    return tuple(k for k in KINDS if k in kinds)


def built_kinds(path: Path) -> tuple[str, ...]:
    """The source kinds the world at `path` holds: () if it is not built; the kinds its COMPLETE marker
    names (a marker naming none was written when every build made every kind)."""
    marker = Path(path) / "COMPLETE"
    if not marker.exists():
        return ()
    named = json.loads(marker.read_text()).get("kinds", list(KINDS))
    return tuple(k for k in KINDS if k in named)


def add_sources(path: Path, kinds, job: Callable[..., dict], pairs: Sequence[tuple[str, str]], label: str,
                build_command: str, progress: bool = True, workers: int | None = None) -> Path:
    """Build the sources of `kinds` that the built world at `path` lacks; returns `path`.

    job(path, profile, seed, model, task, missing) -> {"model", "task", kind: seconds for each of `missing`} runs on
    worker processes for every (model, task) of `pairs` (profile and seed from the world's build.json); the
    other kinds and the pre-trained models are left as they are. build.json gets the new timings and the
    COMPLETE marker the kinds now held. label: the world's name in progress lines ("audio world");
    build_command: the command that builds it, named when `path` is not a built world.
    """
    path = Path(path)
    kinds = check_kinds(kinds)
    have = built_kinds(path)
    if not have:
        raise InvalidInputError(f"{path} is not a built {label} (no COMPLETE marker); build it with `{build_command}`")
    missing = tuple(k for k in kinds if k not in have)
    if not missing:
        return path
    build = json.loads((path / "build.json").read_text())
    profile, seed = build["profile"], int(build["seed"])
    text = f"building {label} ({profile}): {' and '.join(missing)} sources"
    lines = LineProgress(len(pairs), text, enabled=progress)
    t0 = time.perf_counter()
    results = []
    with worker_pool(build_workers(workers)) as pool:
        futures = [pool.submit(job, str(path), profile, seed, m, t, missing) for m, t in pairs]
        for fut in track(as_completed(futures), total=len(futures), description=text, enabled=progress and not lines.active):
            res = fut.result()
            results.append(res)
            lines.step(f"fine-tuning {res['model']}/{res['task']}")
    seconds = time.perf_counter() - t0
    for r in results:
        build["finetune_seconds"].setdefault(f"{r['model']}/{r['task']}", {}).update({k: r[k] for k in missing})
    for kind in missing:
        build["timings_s"][f"train_{kind}_sources_later"] = seconds / len(missing)
    build["timings_s"]["total"] += seconds
    kinds_now = [k for k in KINDS if k in have or k in missing]
    build["kinds"] = kinds_now
    write_build_record(path, build, kinds_now)
    lines.note("complete")
    return path


__all__ = ["KINDS", "add_sources", "built_kinds", "check_kinds"]
