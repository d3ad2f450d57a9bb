"""Canonical audio probes: mono float32 waveforms at `CANONICAL_RATE` (16 kHz), all of one length.

Audio probes travel as one float tensor (N, T) of canonical waveforms, the audio counterpart of the
(N, 3, 224, 224) uint8 image probes: its digest identifies them, and every model resamples the *same*
samples to its own rate (`resample`: scipy's polyphase FIR, Kaiser window, exact rational ratio), so
every model hears the same sound (method.md §1.1: probes are audio clips for audio-text models).

Files (wav, flac, ogg; anything libsndfile decodes, via soundfile) become canonical the same way for
every model: decoded to float32, channels averaged to mono, resampled to 16 kHz, and cut to `seconds`
or zero-padded to the longest clip. torchaudio is not used: its newest release does not match the
project's torch.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from ..errors import InvalidInputError

CANONICAL_RATE = 16_000
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".oga", ".aiff", ".aif")


def resample(wave, orig_sr: int, target_sr: int):
    """Resample along the last axis from `orig_sr` to `target_sr` Hz (polyphase FIR, anti-aliased).

    wave: (..., T) numpy array or torch tensor; returns float32 (..., ceil(T * target_sr / orig_sr)) of
    the same kind (a tensor comes back on CPU). Deterministic; the identity when the rates are equal.

    >>> resample(np.zeros(16000, np.float32), 16000, 48000).shape
    (48000,)
    """
    if orig_sr <= 0 or target_sr <= 0:
        raise InvalidInputError(f"sample rates must be positive, got {orig_sr} -> {target_sr}")
    is_tensor = isinstance(wave, torch.Tensor)
    x = wave.detach().cpu().numpy() if is_tensor else np.asarray(wave)
    x = x.astype(np.float32, copy=False)
    if orig_sr != target_sr:
        from scipy.signal import resample_poly

        ratio = Fraction(int(target_sr), int(orig_sr))
        x = resample_poly(x, ratio.numerator, ratio.denominator, axis=-1).astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(x)) if is_tensor else x


def _sound_input(item):
    """(what soundfile opens: a path string or a BytesIO, a name for errors) of a path, raw bytes or a
    Hugging Face `Audio(decode=False)` record {"bytes", "path"}."""
    import io

    if isinstance(item, dict):
        if item.get("bytes") is not None:
            return io.BytesIO(item["bytes"]), str(item.get("path") or "<bytes>")
        if item.get("path"):
            return str(item["path"]), str(item["path"])
        raise InvalidInputError("a sound record holds neither bytes nor a path")
    if isinstance(item, (bytes, bytearray)):
        return io.BytesIO(bytes(item)), "<bytes>"
    return str(Path(item)), str(item)


def read_audio(path) -> tuple[np.ndarray, int]:
    """Decode a sound file (wav, flac, ... via soundfile) -> (mono float32 (T,), its sample rate).

    path: a file path, raw bytes, or a Hugging Face `Audio(decode=False)` record {"bytes", "path"}."""
    import soundfile

    source, name = _sound_input(path)
    try:
        data, sr = soundfile.read(source, dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise InvalidInputError(f"cannot decode the sound file {name} ({_one_line(exc)}); give wav, flac or ogg "
                                "files") from None
    return data.mean(axis=1).astype(np.float32), int(sr)


def audio_seconds(item) -> float:
    """The duration in seconds of a sound file (path, bytes or {"bytes", "path"} record), read from its
    header: no sample is decoded."""
    import soundfile

    source, name = _sound_input(item)
    try:
        info = soundfile.info(source)
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise InvalidInputError(f"cannot read the sound file {name} ({_one_line(exc)}); give wav, flac or ogg "
                                "files") from None
    return float(info.frames) / float(info.samplerate) if info.samplerate else 0.0


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def fit_length(clip: np.ndarray, length: int) -> np.ndarray:
    """clip (T,) cut to its first `length` samples, or zero-padded at the end to `length`: (length,) float32."""
    out = np.zeros(length, np.float32)
    out[: min(length, len(clip))] = clip[:length]
    return out


def canonical_clip(item, length: int) -> np.ndarray:
    """One sound (path, bytes or {"bytes", "path"} record) -> canonical (length,) float32: decoded, mono,
    resampled to CANONICAL_RATE, cut or zero-padded to `length` samples."""
    return fit_length(resample(*_decoded(item), CANONICAL_RATE), length)


def is_audio_file(path) -> bool:
    return Path(path).suffix.lower() in AUDIO_SUFFIXES


def audio_files(source) -> list[Path]:
    """The sound files of a folder (sorted by path, recursively) or of a list of paths."""
    if isinstance(source, (str, Path)) and Path(source).is_dir():
        files = sorted(p for p in Path(source).rglob("*") if p.is_file() and is_audio_file(p))
        if not files:
            raise InvalidInputError(f"{source} holds no sound files ({', '.join(AUDIO_SUFFIXES)})")
        return files
    paths = [Path(source)] if isinstance(source, (str, Path)) else [Path(p) for p in source]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise InvalidInputError(f"sound file(s) not found: {', '.join(missing[:3])}")
    return paths


def canonical_audio(source, seconds: float | None = None) -> torch.Tensor:
    """Canonical waveforms (N, T) float32 at CANONICAL_RATE from a folder or files of sound.

    T = round(seconds * 16000) when `seconds` is given (longer clips cut, shorter ones zero-padded at the
    end), else the longest clip's length.
    """
    if seconds is not None and not seconds > 0:
        raise InvalidInputError(f"seconds must be positive, got {seconds}")
    clips = [resample(*_decoded(p), CANONICAL_RATE) for p in audio_files(source)]
    length = round(seconds * CANONICAL_RATE) if seconds is not None else max(len(c) for c in clips)
    return torch.from_numpy(np.stack([fit_length(c, length) for c in clips]))


def _decoded(path) -> tuple[np.ndarray, int]:
    wave, sr = read_audio(path)
    if wave.size == 0:
        raise InvalidInputError(f"the sound file {_sound_input(path)[1]} holds no samples")
    return wave, sr


def as_canonical_audio(probes: torch.Tensor | str | Path | Iterable) -> torch.Tensor:
    """A float tensor (N, T) of canonical waveforms as given, or the canonical clips of a folder / files."""
    if isinstance(probes, torch.Tensor):
        if probes.ndim != 2 or not probes.is_floating_point():
            raise InvalidInputError("audio probes must be one float tensor of waveforms (N, samples) at 16 kHz, "
                                    f"or a folder of sound files; got {probes.dtype} {tuple(probes.shape)}")
        return probes.contiguous()
    return canonical_audio(probes)
