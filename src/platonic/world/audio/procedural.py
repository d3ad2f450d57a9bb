"""Procedural sounds, synthesised with numpy at 16 kHz: beat counting, noise colours, tempo.

- beats: 1-6 percussive hits (a decaying tone, a noise burst or a click; one timbre per clip) at
  irregular times at least 120 ms apart;
- noise: white, pink, brown, blue or violet noise (power spectral density ~ f^0, f^-1, f^-2, f^1, f^2,
  shaped in the frequency domain), with a random fade in and out;
- tempo: a regular pulse at about 100 / 150 / 225 / 340 beats per minute (+-6 %), random phase and timbre.
Every clip has a little white noise underneath. Splits are independent draws (no unit to keep apart).
"""

from __future__ import annotations

import numpy as np

from . import canonical

SR = canonical.SAMPLE_RATE
T = canonical.CLIP_SAMPLES
NOISE_EXPONENT = {"white": 0.0, "pink": -1.0, "brown": -2.0, "blue": 1.0, "violet": 2.0}  # PSD ~ f^exponent
TEMPO_BPM = (100.0, 150.0, 225.0, 340.0)


def _hit(rng: np.random.Generator, kind: int, freq: float, decay: float) -> np.ndarray:
    n = int(0.08 * SR)
    t = np.arange(n) / SR
    env = np.exp(-t / decay)
    if kind == 0:
        sound = np.sin(2 * np.pi * freq * t)
    elif kind == 1:
        sound = rng.standard_normal(n)
    else:
        sound = np.sign(np.sin(2 * np.pi * freq * t))
    return (sound * env).astype(np.float32)


def _timbre(rng: np.random.Generator) -> tuple[int, float, float]:
    return int(rng.integers(0, 3)), float(rng.uniform(200, 3000)), float(rng.uniform(0.005, 0.03))


def _add(clip: np.ndarray, sound: np.ndarray, at: int, gain: float) -> None:
    stop = min(T, at + len(sound))
    clip[at:stop] += gain * sound[: stop - at]


def _floor(rng: np.random.Generator) -> np.ndarray:
    return (rng.standard_normal(T) * rng.uniform(0.002, 0.01)).astype(np.float32)


def beats(label: int, rng: np.random.Generator) -> np.ndarray:
    """label + 1 hits at irregular onsets in [20 ms, 900 ms], >= 120 ms apart. -> float32 (T,)."""
    n = label + 1
    while True:
        onsets = np.sort(rng.uniform(0.02, 0.9, size=n))
        if n == 1 or np.diff(onsets).min() >= 0.12:
            break
    clip = _floor(rng)
    hit = _hit(rng, *_timbre(rng))
    for t in onsets:
        _add(clip, hit, int(t * SR), float(rng.uniform(0.6, 1.0)))
    return clip


def noise(label: int, rng: np.random.Generator, colours=tuple(NOISE_EXPONENT)) -> np.ndarray:
    """Coloured noise: white noise shaped by f^(exponent / 2) in amplitude, unit peak, faded. -> (T,)."""
    spectrum = np.fft.rfft(rng.standard_normal(T))
    f = np.fft.rfftfreq(T, 1 / SR)
    f[0] = f[1]
    x = np.fft.irfft(spectrum * f ** (NOISE_EXPONENT[colours[label]] / 2), n=T)
    x = x / np.abs(x).max()
    env = np.ones(T)
    fade_in, fade_out = int(rng.uniform(0.005, 0.2) * SR), int(rng.uniform(0.005, 0.2) * SR)
    env[:fade_in] = np.linspace(0, 1, fade_in)
    env[T - fade_out:] = np.linspace(1, 0, fade_out)
    return (x * env).astype(np.float32) + _floor(rng)


def tempo(label: int, rng: np.random.Generator) -> np.ndarray:
    """A regular pulse at TEMPO_BPM[label] x U(0.94, 1.06) with a random phase. -> float32 (T,)."""
    period = 60.0 / (TEMPO_BPM[label] * rng.uniform(0.94, 1.06))
    clip = _floor(rng)
    hit = _hit(rng, *_timbre(rng))
    t = rng.uniform(0, period)
    while t < T / SR - 0.02:
        _add(clip, hit, int(t * SR), float(rng.uniform(0.8, 1.0)))
        t += period
    return clip


GENERATORS = {"beats": beats, "noise": noise, "tempo": tempo}


def render_split(task: str, labels: np.ndarray, split: str, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """Clips of procedural `task` for labels (n,): int16 PCM (n, CLIP_SAMPLES); every unit is "procedural"."""
    pcm = [canonical.finish(GENERATORS[task](int(y), rng), rng) for y in labels]
    pcm = np.stack(pcm) if pcm else np.zeros((0, T), np.int16)
    return pcm, ["procedural"] * len(labels)
