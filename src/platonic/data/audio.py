"""Decoding labelled sound the way audio probes are made: canonical clips (n, T) float32, 16 kHz mono.

Each item (a file path, or a Hugging Face `Audio(decode=False)` record {"bytes", "path"}) is decoded
with soundfile, its channels averaged, resampled to `CANONICAL_RATE` (scipy's polyphase FIR,
`platonic.models.audio.resample`) and cut or zero-padded at the end to T samples: the same helpers
as `platonic.models.audio.canonical_audio` (the `--probes DIR` of a sound folder).

The length T (`clip_samples`):

    T = round(seconds * 16000)                        the model names its clip length (`DualEncoder.canonical_seconds`,
                                                      e.g. the audio world's models: 1.0 s)
    T = round(min(longest, MAX_SECONDS) * 16000)      the model takes any length (None, e.g. transformers CLAP): the
                                                      split's longest clip (read from the files' headers, no sample
                                                      decoded), capped at 10 s, CLAP's own window

so a data set of 1 s clips stays 1 s (CLAP then repeat-pads it to its window itself, as it does for its own
inputs), and no clip of a longer data set is cut below CLAP's window.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import InvalidInputError
from ..models.audio import CANONICAL_RATE, canonical_clip

MAX_SECONDS = 10.0  # the cap of the data-driven length: CLAP's window (its feature extractor's max_length_s)


def clip_samples(seconds: float | None, longest: float | None = None) -> int:
    """T, the samples of every canonical clip (module docstring): `seconds` when a model names it, else
    the split's `longest` clip (seconds) capped at MAX_SECONDS."""
    chosen = seconds if seconds is not None else min(float(longest or 0.0), MAX_SECONDS)
    if not chosen > 0:
        raise InvalidInputError(f"audio clips need a positive length; got {chosen} s (the sound files are empty?)")
    return max(1, round(chosen * CANONICAL_RATE))


def decode_clips(items, length: int) -> torch.Tensor:
    """(len(items), length) float32 canonical clips at 16 kHz: each item decoded, mono, resampled, fitted."""
    if not items:
        return torch.empty(0, length, dtype=torch.float32)
    return torch.from_numpy(np.stack([canonical_clip(item, length) for item in items]))
