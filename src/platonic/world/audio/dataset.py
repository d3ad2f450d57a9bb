"""The audio world's data: every task and control rendered into train / val / test splits, probes.

A split holds int16 PCM clips (n, T) with T = `canonical.CLIP_SAMPLES` (its float32 view `clips` is
pcm / 32768, the canonical 16 kHz clips), labels (n,) int64, and per clip the split unit it came from
(`units[unit_index[i]]`: "gm-program-40", "espeak-ng:klatt", "speaker:kal", "procedural"), which the
splits keep disjoint (test units never occur in train or val).

Determinism: each (set, split) draws from its own generator `default_rng([seed, set index, split
index])`; the engines are deterministic programs, so one seed gives bitwise the same clips.
Probes: 30 per class of the train split, seed 42, as the image world (`platonic.data.probes`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...data.probes import PROBES_PER_CLASS, probe_indices
from ...errors import ArtifactError, InvalidInputError
from . import canonical, instruments, procedural, speech
from .splits import SPLITS
from .tasks import Task, all_sets
from .tools import require_audio_packages

INSTRUMENT_SETS = ("instrument", "pitch", "chord", "drums")
SPEECH_SETS = ("digits", "commands", "colours", "animals")


@dataclass(frozen=True)
class AudioDataSizes:
    """Clips per class of each split, for tasks and for the controls."""

    train_per_class: int
    val_per_class: int
    test_per_class: int
    control_train_per_class: int
    control_val_per_class: int
    control_test_per_class: int

    def per_class(self, task: Task, split: str) -> int:
        prefix = "control_" if task.role == "control" else ""
        return getattr(self, f"{prefix}{split}_per_class")


SIZES = {
    "tiny": AudioDataSizes(8, 2, 4, 4, 2, 4),
    "full": AudioDataSizes(96, 16, 32, 32, 8, 20),
}


@dataclass
class AudioSplit:
    """pcm (n, T) int16; labels (n,) int64; unit_index (n,) int64 into units (the split units)."""

    pcm: torch.Tensor
    labels: torch.Tensor
    unit_index: torch.Tensor
    units: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def clips(self) -> torch.Tensor:
        """(n, T) float32 canonical clips, 16 kHz, values on the 16-bit grid."""
        return canonical.from_pcm(self.pcm)

    def clip_units(self) -> list[str]:
        """The split unit of every clip, (n,) strings."""
        return [self.units[i] for i in self.unit_index.tolist()]


@dataclass
class AudioTaskData:
    task: Task
    train: AudioSplit
    val: AudioSplit
    test: AudioSplit
    probe_index: torch.Tensor = field(default=None)  # (N,) indices into train

    @property
    def probes(self) -> torch.Tensor:
        """Canonical probes (N, T) float32: 30 x classes train clips, seed 42."""
        return self.train.clips[self.probe_index]


def _render(name: str, labels: np.ndarray, split: str, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    task = all_sets()[name]
    if name in INSTRUMENT_SETS:
        return instruments.render_split(name, labels, split, rng)
    if name in SPEECH_SETS:
        return speech.render_split(task.classes, labels, split, rng)
    return procedural.render_split(name, labels, split, rng)


def render_split(name: str, split: str, per_class: int, seed: int) -> AudioSplit:
    """One split of one task or control: per_class clips of every class in a seeded random order."""
    sets = list(all_sets())
    rng = np.random.default_rng([seed, sets.index(name), SPLITS.index(split)])
    labels = rng.permutation(np.repeat(np.arange(all_sets()[name].n_classes), per_class))
    pcm, clip_units = _render(name, labels, split, rng)
    units = tuple(sorted(set(clip_units)))
    lookup = {u: i for i, u in enumerate(units)}
    return AudioSplit(torch.from_numpy(pcm), torch.from_numpy(labels.astype(np.int64)),
                      torch.tensor([lookup[u] for u in clip_units], dtype=torch.int64), units)


def build_audio_data(sizes: AudioDataSizes, seed: int, names=None, progress: bool = True,
                     probes_per_class: int = PROBES_PER_CLASS) -> dict[str, AudioTaskData]:
    """Every task and control (or only `names`), deterministic under `seed`: name -> AudioTaskData.

    Raises MissingDataError naming the Debian package when a program, the soundfont or a voice is missing.
    """
    from ...progress import track

    require_audio_packages()
    sets = all_sets()
    names = list(sets) if names is None else list(names)
    unknown = [n for n in names if n not in sets]
    if unknown:
        raise InvalidInputError(f"unknown audio task {unknown[0]!r}; one of {', '.join(sets)}")
    out = {}
    for name in track(names, description="rendering audio world data", enabled=progress):
        task = sets[name]
        sp = {s: render_split(name, s, sizes.per_class(task, s), seed) for s in SPLITS}
        probe = probe_indices(len(sp["train"]), task.n_classes, probes_per_class) if task.role == "task" \
            else torch.zeros(0, dtype=torch.long)
        out[name] = AudioTaskData(task, sp["train"], sp["val"], sp["test"], probe_index=probe)
    return out


# -- storage (safetensors, atomic; no pickle) ------------------------------------------------------

def data_to_tensors(data: dict[str, AudioTaskData]) -> tuple[dict[str, torch.Tensor], dict]:
    """Tensors '{name}.{split}.pcm' / '.labels' / '.unit_index', '{name}.probe_index'; and a JSON record
    with each split's unit names and the clip format."""
    tensors, units = {}, {}
    for name, td in data.items():
        for split in SPLITS:
            s = getattr(td, split)
            tensors.update({f"{name}.{split}.pcm": s.pcm, f"{name}.{split}.labels": s.labels,
                            f"{name}.{split}.unit_index": s.unit_index})
            units[f"{name}.{split}"] = list(s.units)
        tensors[f"{name}.probe_index"] = td.probe_index
    record = {"kind": "audio-world-data", "sample_rate": canonical.SAMPLE_RATE, "clip_samples": canonical.CLIP_SAMPLES,
              "pcm_scale": canonical.PCM_SCALE, "sets": list(data), "units": units}
    return tensors, record


def data_from_tensors(tensors: dict[str, torch.Tensor], record: dict) -> dict[str, AudioTaskData]:
    sets = all_sets()
    out = {}
    for name in record["sets"]:
        sp = {s: AudioSplit(tensors[f"{name}.{s}.pcm"], tensors[f"{name}.{s}.labels"], tensors[f"{name}.{s}.unit_index"],
                            tuple(record["units"][f"{name}.{s}"])) for s in SPLITS}
        out[name] = AudioTaskData(sets[name], sp["train"], sp["val"], sp["test"], probe_index=tensors[f"{name}.probe_index"])
    return out


RECORD_KEY = "platonic_audio"


def save_audio_data(path, data: dict[str, AudioTaskData], provenance: dict | None = None) -> Path:
    """Write the data atomically as one safetensors file (JSON record under metadata 'platonic_audio')."""
    from ...storage import write_tensors

    tensors, record = data_to_tensors(data)
    record["provenance"] = provenance or {}
    return write_tensors(path, tensors, record, key=RECORD_KEY, make_parents=True)


def load_audio_data(path) -> dict[str, AudioTaskData]:
    """Read what `save_audio_data` wrote (tensors and JSON only)."""
    from safetensors.torch import load_file

    from ...storage import platonic_record

    record = platonic_record(path, key=RECORD_KEY)
    if not record or record.get("kind") != "audio-world-data":
        raise ArtifactError(f"{path} is not an audio world data file")
    return data_from_tensors(load_file(str(path)), record)


def describe(data: dict[str, AudioTaskData]) -> str:
    """name: classes, clips per split (for logs)."""
    return json.dumps({n: [td.task.n_classes, len(td.train), len(td.val), len(td.test)] for n, td in data.items()})
