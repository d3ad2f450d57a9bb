"""Instrument sounds: tiny MIDI events rendered by fluidsynth with the FluidR3 General MIDI soundfont.

Each clip is one slot of a MIDI file written with `mido`: a program change, one note or a chord, and an
all-sound-off at the clip's end, so no sound rings into the next slot (reverb and chorus are off). A
file of up to `SLOTS_PER_RENDER` slots is rendered in one fluidsynth run at 32 kHz (stereo float), mixed
to mono and resampled to 16 kHz with `canonical.resample`; slot k is samples [k * SLOT, k * SLOT + T).

Splits: the GM programs of every instrument family (and the drum kits) are split by a hash of their
number into disjoint train / val / test sets, shared by every instrument task, so a test clip is always
played by an instrument that no training clip used (the fonts of the image world, as sounds).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from ...errors import InvalidInputError
from . import canonical
from .splits import rank_split
from .tasks import CHORD_QUALITIES, DRUM_SOUNDS, INSTRUMENT_FAMILIES
from .tools import require_soundfont, run

# instrument family -> General MIDI programs (0-based); every program belongs to one family
FAMILY_PROGRAMS: dict[str, tuple[int, ...]] = {
    "piano": (0, 1, 2, 3, 4, 5),
    "organ": (16, 17, 18, 19, 20, 21),
    "guitar": (24, 25, 26, 27, 28, 29, 30, 31),
    "bass": (32, 33, 34, 35, 36, 37, 38, 39),
    "strings": (40, 41, 42, 43, 44, 45, 48, 49),
    "brass": (56, 57, 58, 59, 60, 61, 62, 63),
    "reeds": (64, 65, 66, 67, 68, 69, 70, 71),
    "flutes": (72, 73, 74, 75, 76, 77, 78, 79),
}
FAMILY_RANGE = {"bass": (28, 55), "flutes": (60, 88)}  # MIDI note range; others DEFAULT_RANGE
DEFAULT_RANGE = (45, 76)
# programs whose FluidR3 samples stop below the family's range (measured: silent above this note)
PROGRAM_TOP = {43: 57, 58: 72, 67: 72}
CHORD_INTERVALS = {"major": (0, 4, 7), "minor": (0, 3, 7), "diminished": (0, 3, 6), "augmented": (0, 4, 8),
                   "suspended": (0, 5, 7), "dominant seventh": (0, 4, 7, 10)}
CHORD_FAMILIES = ("piano", "organ", "guitar", "strings", "brass", "reeds")  # no chords on bass or flutes
# drum kits (bank 128 programs of FluidR3_GM) and the GM percussion keys of each drum sound
DRUM_KITS = {0: "standard", 8: "room", 16: "power", 24: "electronic", 25: "tr-808", 32: "jazz", 40: "brush"}
DRUM_NOTES = {"bass drum": (35, 36), "snare drum": (38, 40), "hand clap": (39,), "closed hi-hat": (42, 44),
              "open hi-hat": (46,), "tom drum": (41, 43, 45, 47, 48, 50), "crash cymbal": (49, 57),
              "ride cymbal": (51, 59), "tambourine": (54,), "cowbell": (56,)}
assert tuple(CHORD_INTERVALS) == CHORD_QUALITIES and tuple(DRUM_NOTES) == DRUM_SOUNDS
assert tuple(FAMILY_PROGRAMS) == INSTRUMENT_FAMILIES

RENDER_RATE = 32_000
TICKS_PER_SECOND = 1000  # ticks_per_beat 500 at 120 bpm: one tick per millisecond
SLOT_MS = 1100  # one clip (1000 ms) and 100 ms of silence
SLOTS_PER_RENDER = 256
MELODIC_CHANNEL, DRUM_CHANNEL = 0, 9


def program_split() -> dict[str, dict[str, list[int]]]:
    """split -> family -> GM programs; disjoint across splits within each family (and so overall)."""
    out: dict[str, dict[str, list[int]]] = {"train": {}, "val": {}, "test": {}}
    for family, programs in FAMILY_PROGRAMS.items():
        for split, chosen in rank_split(programs, lambda p: f"gm-program-{p}").items():
            out[split][family] = sorted(chosen)
    return out


def kit_split() -> dict[str, list[int]]:
    """split -> drum kits (bank 128 programs); disjoint."""
    return {s: sorted(k) for s, k in rank_split(list(DRUM_KITS), lambda k: f"gm-kit-{k}").items()}


# -- planning one clip: (unit, events) with events [(ms, kind, channel, a, b)] inside one slot ---------

def _note_events(channel: int, notes, rng: np.random.Generator, strum_ms: int = 0) -> list[tuple]:
    onset = int(rng.integers(0, 150))
    duration = int(rng.integers(400, 800))
    events = []
    for k, note in enumerate(notes):
        start = onset + (int(rng.integers(0, strum_ms + 1)) if strum_ms and k else 0)
        events.append((start, "note_on", channel, int(note), int(rng.integers(60, 116))))
        events.append((min(onset + duration, 960), "note_off", channel, int(note), 0))
    return events


def _pitch_in_range(family: str, program: int, rng: np.random.Generator, pitch_class: int | None = None) -> int:
    lo, hi = FAMILY_RANGE.get(family, DEFAULT_RANGE)
    hi = min(hi, PROGRAM_TOP.get(program, hi))
    choices = [n for n in range(lo, hi + 1) if pitch_class is None or n % 12 == pitch_class]
    return int(rng.choice(choices))


def _pick_program(pool: dict[str, list[int]], families, rng, exclude=()) -> tuple[str, int]:
    family = str(rng.choice(list(families)))
    return family, int(rng.choice([p for p in pool[family] if p not in exclude]))


def plan_clip(task: str, label: int, split: str, rng: np.random.Generator) -> tuple[str, int, list[tuple]]:
    """(unit, program, events) of one clip of `task` ("instrument", "pitch", "chord", "drums").

    unit names what the split keeps apart ("gm-program-40", "gm-kit-8"); program is the GM program
    (drums: the kit); events are (ms within the slot, message, channel, note, velocity).
    """
    if task == "drums":
        kit = int(rng.choice(kit_split()[split]))
        note = int(rng.choice(DRUM_NOTES[DRUM_SOUNDS[label]]))
        return f"gm-kit-{kit}", kit, _note_events(DRUM_CHANNEL, [note], rng)
    pool = program_split()[split]
    if task == "instrument":
        family = INSTRUMENT_FAMILIES[label]
        program = int(rng.choice(pool[family]))
        events = _note_events(MELODIC_CHANNEL, [_pitch_in_range(family, program, rng)], rng)
    elif task == "pitch":
        family, program = _pick_program(pool, INSTRUMENT_FAMILIES, rng)
        events = _note_events(MELODIC_CHANNEL, [_pitch_in_range(family, program, rng, pitch_class=label)], rng)
    elif task == "chord":
        family, program = _pick_program(pool, CHORD_FAMILIES, rng, exclude=PROGRAM_TOP)
        root = int(rng.integers(48, 65))
        notes = [root + i for i in CHORD_INTERVALS[CHORD_QUALITIES[label]]]
        for _ in range(int(rng.integers(0, len(notes)))):  # a random inversion
            notes = notes[1:] + [notes[0] + 12]
        events = _note_events(MELODIC_CHANNEL, notes, rng, strum_ms=20)
    else:
        raise InvalidInputError(f"unknown instrument task {task!r}; use drums, instrument, pitch or chord")
    return f"gm-program-{program}", program, events


# -- rendering ------------------------------------------------------------------------------------

def write_midi(path: Path, slots: list[tuple[int, int, list[tuple]]]) -> None:
    """One MIDI file, slot k starting at k * SLOT_MS ms: (channel's program, program, events) per slot."""
    import mido

    timeline = []
    for k, (channel, program, events) in enumerate(slots):
        t0 = k * SLOT_MS
        timeline.append((t0, 0, mido.Message("control_change", channel=channel, control=121, value=0)))
        timeline.append((t0, 1, mido.Message("program_change", channel=channel, program=program)))
        for ms, kind, ch, note, velocity in events:
            timeline.append((t0 + ms, 2 if kind == "note_off" else 3, mido.Message(kind, channel=ch, note=note, velocity=velocity)))
        end = t0 + canonical.CLIP_SAMPLES * 1000 // canonical.SAMPLE_RATE
        timeline.append((end, 4, mido.Message("control_change", channel=channel, control=120, value=0)))
        timeline.append((end, 5, mido.Message("control_change", channel=channel, control=123, value=0)))
    timeline.sort(key=lambda e: (e[0], e[1]))
    mid = mido.MidiFile(ticks_per_beat=TICKS_PER_SECOND // 2)
    track = mido.MidiTrack()
    mid.tracks.append(track)
    track.append(mido.MetaMessage("set_tempo", tempo=500_000, time=0))
    last = 0
    for ms, _, msg in timeline:
        track.append(msg.copy(time=ms - last))
        last = ms
    track.append(mido.MetaMessage("end_of_track", time=len(slots) * SLOT_MS - last))
    mid.save(str(path))


def render_slots(slots: list[tuple[int, int, list[tuple]]]) -> np.ndarray:
    """Render (channel, program, events) slots -> float32 (n, CLIP_SAMPLES) mono at 16 kHz (unnormalised)."""
    soundfont = require_soundfont()
    out = np.zeros((len(slots), canonical.CLIP_SAMPLES), np.float32)
    slot = SLOT_MS * canonical.SAMPLE_RATE // 1000
    with tempfile.TemporaryDirectory(prefix="platonic-fluidsynth-") as tmp:
        for start in range(0, len(slots), SLOTS_PER_RENDER):
            chunk = slots[start:start + SLOTS_PER_RENDER]
            mid, raw = Path(tmp) / "clips.mid", Path(tmp) / "clips.raw"
            write_midi(mid, chunk)
            run(["fluidsynth", "-n", "-i", "-q", "-R", "0", "-C", "0", "-g", "0.5", "-r", str(RENDER_RATE),
                 "-O", "float", "-T", "raw", "-E", "little", "-F", str(raw), str(soundfont), str(mid)])
            stereo = np.fromfile(raw, dtype="<f4")
            mono = canonical.resample(stereo.reshape(-1, 2).mean(axis=1), RENDER_RATE, canonical.SAMPLE_RATE)
            mono = np.concatenate([mono, np.zeros(max(0, len(chunk) * slot - len(mono)), np.float32)])
            for k in range(len(chunk)):
                out[start + k] = mono[k * slot: k * slot + canonical.CLIP_SAMPLES]
    return out


def render_split(task: str, labels: np.ndarray, split: str, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """Clips of `task` for `labels` (n,) in `split`: int16 PCM (n, CLIP_SAMPLES) and each clip's split unit."""
    plans = [plan_clip(task, int(y), split, rng) for y in labels]
    finish_seeds = rng.integers(0, 2**63, size=len(plans))
    channel = DRUM_CHANNEL if task == "drums" else MELODIC_CHANNEL
    raw = render_slots([(channel, program, events) for _, program, events in plans])
    pcm = np.stack([canonical.finish(raw[k], np.random.default_rng(int(s))) for k, s in enumerate(finish_seeds)]) \
        if len(plans) else np.zeros((0, canonical.CLIP_SAMPLES), np.int16)
    return pcm, [unit for unit, _, _ in plans]
