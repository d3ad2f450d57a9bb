"""Spoken words from three speech engines: espeak-ng (its voice variants, each in one of four English accents),
flite (kal, kal16, awb, rms, slt) and festival (kal_diphone, ked_diphone, cmu_us_slt_arctic_hts).

Splits keep speakers apart: an espeak-ng voice variant family (the variant's name without trailing digits:
m1..m8 are one family "m", klatt..klatt6 one "klatt") or one flite / festival speaker (flite kal and
kal16 and festival kal_diphone are the same speaker "kal"; flite slt and festival's slt HTS voice are
"slt") belongs to exactly one of train / val / test (`voice_split`), so test voices are never heard in
training, by any task.

A clip: a word, a voice drawn from its split (engine espeak-ng / flite / festival with probabilities
0.5 / 0.2 / 0.3), the engine's speaking rate (and pitch, espeak-ng), then a tape-speed change of
+-8 %, the silence trimmed, placed at a random offset of the 1 s clip, peak-normalised.
Engines are run in batches: espeak-ng once per voice (SSML words separated by 800 ms breaks, cut
apart at the silences; a variant whose sound fills the breaks is run once per word), festival once per split (a Scheme script writing one file per clip), flite once
per clip (it has no usable break).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import canonical
from .splits import rank_split
from .tools import FESTIVAL_VOICES, RenderError, require_festival_voice, run

ESPEAK_ACCENTS = ("en-us", "en-gb", "en-gb-scotland", "en-029")
FLITE_VOICES = {"kal": "kal", "kal16": "kal", "awb": "awb", "rms": "rms", "slt": "slt"}  # voice -> speaker
FESTIVAL_SPEAKERS = {"kal_diphone": "kal", "ked_diphone": "ked", "cmu_us_slt_arctic_hts": "slt"}
ENGINE_WEIGHTS = {"espeak-ng": 0.5, "flite": 0.2, "festival": 0.3}
SPEED_RANGE = (0.92, 1.08)
BREAK_MS = 800
GAP_FRAMES = 40  # 10 ms frames of silence that separate two words of an espeak-ng batch (0.4 s)


@dataclass(frozen=True)
class Voice:
    """engine ("espeak-ng", "flite", "festival"), the engine's voice name, and the split unit it belongs to."""

    engine: str
    name: str
    unit: str


@lru_cache(maxsize=1)
def espeak_variants() -> tuple[str, ...]:
    """The voice variants espeak-ng ships (its data directory's voices/!v), sorted."""
    out = run(["espeak-ng", "--version"]).stdout
    match = re.search(r"Data at:\s*(\S+)", out)
    folder = Path(match.group(1)) / "voices" / "!v" if match else None
    if folder is None or not folder.is_dir():
        raise RenderError(f"espeak-ng reports no voice variant folder ({out.strip()!r})")
    return tuple(sorted(p.name for p in folder.iterdir() if p.is_file()))


def variant_family(variant: str) -> str:
    """'m3' -> 'm', 'klatt4' -> 'klatt', 'Gene2' -> 'gene': variants that differ by a number are one speaker."""
    return re.sub(r"\d+$", "", variant).lower()


def espeak_accent(variant: str) -> str:
    """The accent a variant speaks with, fixed by a hash of its name (one espeak-ng run per voice)."""
    return ESPEAK_ACCENTS[int(hashlib.sha256(variant.encode()).hexdigest()[:8], 16) % len(ESPEAK_ACCENTS)]


def all_voices() -> list[Voice]:
    """Every voice of every engine, with its split unit."""
    voices = [Voice("espeak-ng", f"{espeak_accent(v)}+{v}", f"espeak-ng:{variant_family(v)}") for v in espeak_variants()]
    voices += [Voice("flite", name, f"speaker:{speaker}") for name, speaker in FLITE_VOICES.items()]
    voices += [Voice("festival", name, f"speaker:{speaker}") for name, speaker in FESTIVAL_SPEAKERS.items()]
    return voices


@lru_cache(maxsize=1)
def voice_split() -> dict[str, dict[str, list[Voice]]]:
    """split -> engine -> voices. espeak-ng variant families and the five flite / festival speakers are
    each split by `rank_split`; a unit's voices all land in its split."""
    voices = all_voices()
    espeak_units = sorted({v.unit for v in voices if v.engine == "espeak-ng"})
    other_units = sorted({v.unit for v in voices if v.engine != "espeak-ng"})
    where = {}
    for units in (espeak_units, other_units):
        for split, chosen in rank_split(units).items():
            where.update({u: split for u in chosen})
    out = {s: {e: [] for e in ENGINE_WEIGHTS} for s in ("train", "val", "test")}
    for v in voices:
        out[where[v.unit]][v.engine].append(v)
    return out


def plan_clip(word: str, split: str, rng: np.random.Generator) -> dict:
    """One clip's recipe: word, voice, engine prosody, tape speed."""
    pool = voice_split()[split]
    engines = [e for e in ENGINE_WEIGHTS if pool[e]]
    weights = np.array([ENGINE_WEIGHTS[e] for e in engines])
    engine = engines[int(rng.choice(len(engines), p=weights / weights.sum()))]
    voice = pool[engine][int(rng.integers(0, len(pool[engine])))]
    plan = {"word": word, "voice": voice, "speed": float(rng.uniform(*SPEED_RANGE))}
    if engine == "espeak-ng":
        plan.update(rate=int(rng.integers(80, 131)), pitch=int(rng.integers(60, 141)))
    else:
        plan.update(stretch=round(float(rng.uniform(0.85, 1.2)), 3))
    return plan


# -- engines: each returns (wave float32 (L,), sample rate) per plan ---------------------------------

def _islands(wave: np.ndarray, sr: int, threshold: float = 2e-3) -> list[tuple[int, int]]:
    """Sample ranges of sound separated by at least GAP_FRAMES silent 10 ms frames."""
    frame = sr // 100
    m = len(wave) // frame
    loud = np.abs(wave[: m * frame]).reshape(m, frame).max(axis=1) > threshold
    out, start, quiet = [], None, 0
    for i, is_loud in enumerate(loud):
        if is_loud:
            if start is None:
                start = i
            quiet = 0
            end = i + 1
        elif start is not None:
            quiet += 1
            if quiet >= GAP_FRAMES:
                out.append((start * frame, end * frame))
                start = None
    if start is not None:
        out.append((start * frame, end * frame))
    return out


def _espeak_batch(voice: str, plans: list[dict], tmp: Path) -> list[tuple[np.ndarray, int]]:
    body = "".join(f'<prosody rate="{p["rate"]}%" pitch="{p["pitch"]}%">{p["word"]}</prosody><break time="{BREAK_MS}ms"/>'
                   for p in plans)
    path = tmp / "espeak.wav"
    run(["espeak-ng", "-m", "-v", voice, "-w", str(path), f"<speak>{body}</speak>"])
    wave, sr = canonical.read_audio(path)
    islands = _islands(wave, sr)
    if len(islands) == len(plans):
        return [(wave[a:b], sr) for a, b in islands]
    if len(plans) == 1:
        return [(wave, sr)]
    # a variant whose sound fills the breaks (echo, breath noise): one run per word instead
    return [res for p in plans for res in _espeak_batch(voice, [p], tmp)]


def _flite(plan: dict, tmp: Path) -> tuple[np.ndarray, int]:
    path = tmp / "flite.wav"
    run(["flite", "-voice", plan["voice"].name, "--setf", f"duration_stretch={plan['stretch']}",
         "-t", plan["word"], "-o", str(path)])
    return canonical.read_audio(path)


def _festival_batch(plans: list[dict], tmp: Path) -> list[tuple[np.ndarray, int]]:
    lines, current = [], None
    for k, p in enumerate(plans):
        if p["voice"].name != current:
            require_festival_voice(p["voice"].name)
            current = p["voice"].name
            lines.append(f"(voice_{current})")
        lines.append(f"(Parameter.set 'Duration_Stretch {p['stretch']})")
        lines.append(f'(utt.save.wave (SynthText "{p["word"]}") "{tmp / f"festival{k}.wav"}" \'riff)')
    script = tmp / "clips.scm"
    script.write_text("\n".join(lines) + "\n")
    run(["festival", "--batch", str(script)])
    return [canonical.read_audio(tmp / f"festival{k}.wav") for k in range(len(plans))]


def render_raw(plans: list[dict]) -> list[tuple[np.ndarray, int]]:
    """The engines' own output for each plan, in plan order: (wave (L,), sample rate)."""
    out: list = [None] * len(plans)
    with tempfile.TemporaryDirectory(prefix="platonic-speech-") as tmp:
        tmp = Path(tmp)
        by_voice: dict[str, list[int]] = {}
        for k, p in enumerate(plans):
            if p["voice"].engine == "espeak-ng":
                by_voice.setdefault(p["voice"].name, []).append(k)
            elif p["voice"].engine == "flite":
                out[k] = _flite(p, tmp)
        for voice, idx in sorted(by_voice.items()):
            for k, res in zip(idx, _espeak_batch(voice, [plans[k] for k in idx], tmp)):
                out[k] = res
        fest = sorted((k for k, p in enumerate(plans) if p["voice"].engine == "festival"),
                      key=lambda k: (plans[k]["voice"].name, k))
        if fest:
            for k, res in zip(fest, _festival_batch([plans[k] for k in fest], tmp)):
                out[k] = res
    return out


def canonicalise(wave: np.ndarray, sr: int, speed: float, rng: np.random.Generator) -> np.ndarray:
    """Engine output -> int16 PCM (CLIP_SAMPLES,): tape speed `speed` (resampled to 16 kHz / speed, played
    at 16 kHz), silence trimmed, placed at a random offset, peak-normalised."""
    target = int(round(canonical.SAMPLE_RATE / speed / 10)) * 10
    x = canonical.resample(wave, sr, target)
    a, b = canonical.active_span(x)
    return canonical.finish(canonical.place(x[a:b], rng), rng)


def render_split(words, labels: np.ndarray, split: str, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """Spoken `words[label]` for labels (n,) in `split`: int16 PCM (n, CLIP_SAMPLES) and each clip's speaker unit."""
    plans = [plan_clip(words[int(y)], split, rng) for y in labels]
    seeds = rng.integers(0, 2**63, size=len(plans))
    raw = render_raw(plans)
    pcm = [canonicalise(w, sr, p["speed"], np.random.default_rng(int(s))) for (w, sr), p, s in zip(raw, plans, seeds)]
    pcm = np.stack(pcm) if pcm else np.zeros((0, canonical.CLIP_SAMPLES), np.int16)
    return pcm, [p["voice"].unit for p in plans]


def voice_names(split: str) -> list[str]:
    """Every voice of `split`, as "engine:name" (for the docs and the hygiene test)."""
    return sorted(f"{v.engine}:{v.name}" for vs in voice_split()[split].values() for v in vs)


assert set(FESTIVAL_SPEAKERS) == set(FESTIVAL_VOICES)
