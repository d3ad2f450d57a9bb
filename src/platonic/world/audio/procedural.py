"""Procedural sounds, synthesised with numpy at 16 kHz: beat counting, noise colours, tempo.

- beats: 1-6 percussive hits (a decaying tone, a noise burst or a click; one timbre per clip) at
  irregular times at least 120 ms apart;
- noise: white, pink, brown, blue or violet noise (power spectral density ~ f^0, f^-1, f^-2, f^1, f^2,
  shaped in the frequency domain), each exponent jittered by +-0.4, band-limited at random corners, a
  0.3-1.0 s burst over a white floor of random level (recipe v2: the plain colours were 97.5-100 %
  zero-shot for every model);
- tempo: a regular pulse at about 100 / 150 / 225 / 340 beats per minute (+-6 %), random phase and timbre.
Every clip has some white noise underneath. Splits are independent draws (no unit to keep apart).
"""

from __future__ import annotations

import numpy as np

from . import canonical

SR = canonical.SAMPLE_RATE
T = canonical.CLIP_SAMPLES
NOISE_EXPONENT = {"white": 0.0, "pink": -1.0, "brown": -2.0, "blue": 1.0, "violet": 2.0}  # PSD ~ f^exponent
NOISE_JITTER = 0.4                 # a clip's exponent: its colour's +- this (uniform)
NOISE_LOW_CUT = (20.0, 400.0)      # Hz, the high-pass corner, log-uniform
NOISE_HIGH_CUT = (1500.0, 8000.0)  # Hz, the low-pass corner, log-uniform
NOISE_SECONDS = (0.3, 1.0)         # the burst's length, uniform
NOISE_FLOOR = (0.005, 0.1)         # std of the white floor under it, log-uniform (the burst peaks at 1)
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
    """Coloured noise, made hard to read (recipe v2): the colour's exponent +- NOISE_JITTER, band-limited
    by a random high-pass and low-pass (4th-order power roll-offs, corners log-uniform in NOISE_LOW_CUT /
    NOISE_HIGH_CUT Hz), a burst of NOISE_SECONDS with random fades at a random place, over a white floor
    of log-uniform std NOISE_FLOOR (relative to the burst's unit peak). -> float32 (T,)."""
    f = np.fft.rfftfreq(T, 1 / SR)
    f[0] = f[1]
    exponent = NOISE_EXPONENT[colours[label]] + rng.uniform(-NOISE_JITTER, NOISE_JITTER)
    lo = np.exp(rng.uniform(*np.log(NOISE_LOW_CUT)))
    hi = np.exp(rng.uniform(*np.log(NOISE_HIGH_CUT)))
    shape = f ** (exponent / 2) / np.sqrt(1 + (lo / f) ** 4) / np.sqrt(1 + (f / hi) ** 4)
    x = np.fft.irfft(np.fft.rfft(rng.standard_normal(T)) * shape, n=T)
    x = x / np.abs(x).max()
    n = int(rng.uniform(*NOISE_SECONDS) * SR)
    start = int(rng.integers(0, T - n + 1))
    burst = np.ones(n)
    longest_fade = min(0.2, n / SR / 3)
    fade_in, fade_out = int(rng.uniform(0.005, longest_fade) * SR), int(rng.uniform(0.005, longest_fade) * SR)
    burst[:fade_in] = np.linspace(0, 1, fade_in)
    burst[n - fade_out:] = np.linspace(1, 0, fade_out)
    env = np.zeros(T)
    env[start:start + n] = burst
    floor = rng.standard_normal(T) * np.exp(rng.uniform(*np.log(NOISE_FLOOR)))
    return (x * env + floor).astype(np.float32)


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
