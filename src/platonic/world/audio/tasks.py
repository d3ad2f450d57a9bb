"""The audio world's tasks and controls: class names, one prompt template each, pre-training captions.

Tasks (9) and their sources (docs/audio_world.md):
    instrument   8 classes  fluidsynth + FluidR3 GM: one note of an instrument family
    pitch       12 classes  fluidsynth: the pitch class of one note (any octave, any instrument)
    chord        6 classes  fluidsynth: chord quality
    digits      10 classes  speech engines: a spoken digit             } related group (spoken words)
    commands    10 classes  speech engines: a spoken command word      }
    colours     10 classes  speech engines: a spoken colour word        held-out related task
    beats        6 classes  procedural: how many clicks
    noise        5 classes  procedural: noise colour
    tempo        4 classes  procedural: the rate of a regular pulse
Controls (the roles of CIFAR-100 and ImageNet; sounds no task uses):
    drums       10 classes  fluidsynth General MIDI drum kits (no task plays percussion)
    animals     10 classes  speech engines: spoken animal names (no task says them)

A task is the image world's `Task` value (name, classes, template, hints, domain, source, role).
"""

from __future__ import annotations

from ..common.tasks import Task
from ..common.tasks import caption_pools as common_caption_pools
from ..common.tasks import caption_vocabulary as common_vocabulary

INSTRUMENT_FAMILIES = ("piano", "organ", "guitar", "bass", "strings", "brass", "reeds", "flutes")
INSTRUMENT_HINTS = ("keyboard instrument", "keyboard instrument", "plucked instrument", "plucked instrument",
                    "orchestral instrument", "wind instrument", "wind instrument", "wind instrument")
PITCH_CLASSES = ("C", "C sharp", "D", "D sharp", "E", "F", "F sharp", "G", "G sharp", "A", "A sharp", "B")
CHORD_QUALITIES = ("major", "minor", "diminished", "augmented", "suspended", "dominant seventh")
CHORD_HINTS = ("bright chord", "dark chord", "tense chord", "tense chord", "open chord", "four-note chord")
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
COMMAND_WORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
COMMAND_HINTS = ("answer", "answer", "direction", "direction", "direction", "direction", "switch", "switch",
                 "instruction", "instruction")
COLOUR_WORDS = ("red", "green", "blue", "yellow", "orange", "purple", "pink", "brown", "black", "white")
COLOUR_HINTS = ("warm colour", "cool colour", "cool colour", "warm colour", "warm colour", "cool colour",
                "warm colour", "dark colour", "dark colour", "light colour")
BEAT_COUNTS = ("one", "two", "three", "four", "five", "six")
NOISE_COLOURS = ("white", "pink", "brown", "blue", "violet")
NOISE_HINTS = ("hiss", "soft rumble", "deep rumble", "bright hiss", "bright hiss")
TEMPOS = ("slow", "moderate", "fast", "very fast")
DRUM_SOUNDS = ("bass drum", "snare drum", "hand clap", "closed hi-hat", "open hi-hat", "tom drum", "crash cymbal",
               "ride cymbal", "tambourine", "cowbell")
DRUM_HINTS = ("drum", "drum", "percussion", "cymbal", "cymbal", "drum", "cymbal", "cymbal", "percussion", "percussion")
ANIMAL_WORDS = ("cat", "dog", "horse", "cow", "sheep", "bird", "fish", "mouse", "lion", "monkey")


def _parity(words) -> tuple[str, ...]:
    return tuple("even number" if i % 2 == 0 else "odd number" for i in range(len(words)))


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("instrument", INSTRUMENT_FAMILIES, "a recording of {} playing.", INSTRUMENT_HINTS, "musical instrument",
             "fluidsynth"),
        Task("pitch", PITCH_CLASSES, "a musical note with the pitch {}.",
             tuple("sharp note" if " " in p else "natural note" for p in PITCH_CLASSES), "musical note", "fluidsynth"),
        Task("chord", CHORD_QUALITIES, "a {} chord.", CHORD_HINTS, "chord", "fluidsynth"),
        Task("digits", DIGIT_WORDS, "a voice saying the number {}.", _parity(DIGIT_WORDS), "spoken number", "speech"),
        Task("commands", COMMAND_WORDS, "a voice saying the word {}.", COMMAND_HINTS, "spoken word", "speech"),
        Task("colours", COLOUR_WORDS, "a voice saying the colour {}.", COLOUR_HINTS, "spoken colour", "speech"),
        Task("beats", BEAT_COUNTS, "the sound of {} beats.", tuple("a few beats" if i < 3 else "many beats" for i in range(6)),
             "beats", "procedural"),
        Task("noise", NOISE_COLOURS, "the sound of {} noise.", NOISE_HINTS, "noise", "procedural"),
        Task("tempo", TEMPOS, "a rhythm at a {} tempo.", ("slow pulse", "steady pulse", "quick pulse", "quick pulse"),
             "rhythm", "procedural"),
    )
}
CONTROLS: dict[str, Task] = {
    "drums": Task("drums", DRUM_SOUNDS, "the sound of a {}.", DRUM_HINTS, "drum sound", "fluidsynth", role="control"),
    "animals": Task("animals", ANIMAL_WORDS, "a person saying the word {}.", ("animal name",) * len(ANIMAL_WORDS),
                    "spoken animal name", "speech", role="control"),
}
TASK_NAMES = tuple(TASKS)
CONTROL_NAMES = tuple(CONTROLS)
RELATED_GROUP = ("digits", "commands")
HELD_OUT_RELATED = "colours"


def all_sets() -> dict[str, Task]:
    """Tasks then controls, name -> Task."""
    return {**TASKS, **CONTROLS}


GENERIC_CAPTIONS = ("a sound.", "a recording.", "a short audio clip.", "something you can hear.")


NAMING = ("{c}.", "a recording of {c}, a {domain}.", "a clip of {c}.")
HINTING = ("a {h}.", "the sound of a {h}.", "a {domain}.", "a recording of a {domain}.")


def caption_pools(task: Task) -> dict[str, list[list[str]]]:
    """Per class: 'name' captions (name the class), 'hint' captions (a group or the domain) (`common.tasks`)."""
    return common_caption_pools(task, NAMING, HINTING)


def caption_vocabulary() -> list[str]:
    """Every caption string audio pre-training may use, sorted (the text cache is keyed by this list)."""
    return common_vocabulary(all_sets(), GENERIC_CAPTIONS, caption_pools)
