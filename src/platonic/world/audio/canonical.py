"""Canonical audio clips: 16 kHz mono, `CLIP_SECONDS` long, float32 on the 16-bit PCM grid.

Every clip of the audio world is a float32 vector (T,) with T = `CLIP_SAMPLES` (16,000: one second at
`SAMPLE_RATE` = 16,000 Hz) whose values are k / 32768 for integers k in [-32768, 32767], so it is stored
losslessly as int16 PCM (`to_pcm` / `from_pcm`); a split holds clips (n, T).

`resample` (`platonic.models.audio`, the library's canonical audio) is the one resampling helper: the
renderers use it to bring every engine's output to 16 kHz, and each model resamples the same canonical
samples to its own rate with it, so every model hears the same sound.
"""

from __future__ import annotations

import numpy as np
import torch

from ...errors import InvalidInputError
from ...models.audio import CANONICAL_RATE, read_audio, resample  # noqa: F401 - the renderers use them from here

SAMPLE_RATE = CANONICAL_RATE
CLIP_SECONDS = 1.0
CLIP_SAMPLES = int(SAMPLE_RATE * CLIP_SECONDS)
PCM_SCALE = 32768.0


def to_pcm(clip: np.ndarray) -> np.ndarray:
    """float (..., T) in [-1, 1] -> int16 (..., T), rounded to nearest, clipped."""
    return np.clip(np.rint(np.asarray(clip, np.float64) * PCM_SCALE), -32768, 32767).astype(np.int16)


def from_pcm(pcm) -> torch.Tensor:
    """int16 (..., T) -> float32 (..., T) = pcm / 32768 (exact)."""
    return torch.as_tensor(pcm).to(torch.float32) / PCM_SCALE


def active_span(wave: np.ndarray, rel_threshold: float = 0.02, frame: int = 160) -> tuple[int, int]:
    """(start, stop) sample range of the frames whose peak exceeds rel_threshold x the wave's peak."""
    peak = float(np.abs(wave).max()) if wave.size else 0.0
    if peak == 0.0:
        return 0, 0
    m = len(wave) // frame + (len(wave) % frame > 0)
    padded = np.zeros(m * frame, np.float32)
    padded[: len(wave)] = np.abs(wave)
    loud = np.flatnonzero(padded.reshape(m, frame).max(axis=1) > rel_threshold * peak)
    return int(loud[0] * frame), int(min(len(wave), (loud[-1] + 1) * frame))


def place(wave: np.ndarray, rng: np.random.Generator, fade: int = 320) -> np.ndarray:
    """Put a trimmed sound (L,) at a random offset of a silent clip (CLIP_SAMPLES,); longer sounds keep
    their first CLIP_SAMPLES samples with a `fade`-sample fade-out."""
    out = np.zeros(CLIP_SAMPLES, np.float32)
    if len(wave) >= CLIP_SAMPLES:
        w = wave[:CLIP_SAMPLES].astype(np.float32).copy()
        w[-fade:] *= np.linspace(1.0, 0.0, fade, dtype=np.float32)
        return w
    offset = int(rng.integers(0, CLIP_SAMPLES - len(wave) + 1))
    out[offset: offset + len(wave)] = wave
    return out


def finish(clip: np.ndarray, rng: np.random.Generator, peak_range=(0.3, 0.9)) -> np.ndarray:
    """Peak-normalise a (CLIP_SAMPLES,) clip to a random peak in `peak_range` and quantise -> int16 PCM.

    A silent clip is an error (a renderer produced nothing): it would be a clip of no class.
    """
    clip = np.asarray(clip, np.float32)
    if clip.shape != (CLIP_SAMPLES,):
        raise InvalidInputError(f"a canonical clip has {CLIP_SAMPLES} samples, got shape {clip.shape}")
    peak = float(np.abs(clip).max())
    if not np.isfinite(peak) or peak < 1e-4:
        raise InvalidInputError("a rendered clip is silent or not finite; the renderer produced no sound")
    return to_pcm(clip * (rng.uniform(*peak_range) / peak))
