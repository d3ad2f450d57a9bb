"""One labelled split of a data source, read without decoding (`Split`), and its rows decoded on demand
(`LazyImages`, `LazyClips`): memory follows the rows used, not the size of the split (`platonic.data.sources`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import torch

from ..errors import InvalidInputError
from ..models.audio import CANONICAL_RATE
from ..models.images import CANONICAL_SIZE
from ..progress import track
from .audio import clip_samples, decode_clips
from .images import decode_batch

SPLIT_ALIASES = {"train": ("train",), "test": ("test",), "val": ("val", "validation", "valid")}
BATCH = 64


@dataclass(frozen=True)
class Split:
    """One labelled split, read without decoding.

    labels: (n,) int64 label indices; class_names: the source's name of each label index (None where it
    has none); fetch(rows) -> the raw items of those rows (paths, byte records or PIL images) that
    `platonic.data.images.open_image` (images) or `platonic.models.audio.read_audio` (sound) decodes;
    identity: a string naming the rows' content (data digest); modality: "image" or "audio";
    longest: (audio) the duration in seconds of the split's longest clip, read from the files' headers
    (memoised; a subset keeps its parent's, so the parts of a cut share one clip length).
    """

    source: str
    name: str
    labels: torch.Tensor
    class_names: tuple[str, ...] | None
    fetch: Callable[[list[int]], list] = field(repr=False)
    identity: str = ""
    modality: str = "image"
    longest: Callable[[], float] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, rows: torch.Tensor, name: str | None = None) -> "Split":
        """The split restricted to `rows` (n,) (in that order); nothing is decoded."""
        rows = torch.as_tensor(rows, dtype=torch.long)
        mapping = rows.tolist()
        h = hashlib.sha256(self.identity.encode())
        h.update(rows.numpy().tobytes())
        return Split(self.source, name or self.name, self.labels[rows], self.class_names,
                     lambda picked: self.fetch([mapping[i] for i in picked]), h.hexdigest(), self.modality, self.longest)

    def clip_samples(self, seconds: float | None = None) -> int:
        """T, the samples of each canonical clip of this (audio) split: round(seconds * 16000), or with
        seconds None (a model that takes any length) the longest clip's, capped at 10 s
        (`platonic.data.audio.clip_samples`)."""
        self._require_audio()
        return clip_samples(seconds, None if seconds is not None else self.longest())

    def batches(self, rows: Sequence[int] | torch.Tensor, size: int = CANONICAL_SIZE, batch_size: int = BATCH,
                seconds: float | None = None) -> Iterator[torch.Tensor]:
        """Batches of exactly `rows`, in that order; only they are decoded: images (b, 3, size, size) uint8,
        sound (b, T) float32 canonical clips at 16 kHz with T = `clip_samples(seconds)`."""
        rows = [int(r) for r in torch.as_tensor(rows).flatten().tolist()]
        length = self.clip_samples(seconds) if self.modality == "audio" else None
        for start in range(0, len(rows), batch_size):
            items = self.fetch(rows[start:start + batch_size])
            yield decode_clips(items, length) if length is not None else decode_batch(items, size)

    def decode(self, rows: Sequence[int] | torch.Tensor | None = None, size: int = CANONICAL_SIZE,
               batch_size: int = BATCH, progress: bool = False, description: str | None = None,
               seconds: float | None = None) -> torch.Tensor:
        """`rows` (default: all), decoded in batches into one tensor: images (len(rows), 3, size, size) uint8,
        sound (len(rows), T) float32 at 16 kHz, T = `clip_samples(seconds)` (`size` applies to images,
        `seconds` to sound)."""
        rows = torch.arange(len(self)) if rows is None else torch.as_tensor(rows, dtype=torch.long).flatten()
        if self.modality == "audio":
            out = torch.empty(len(rows), self.clip_samples(seconds), dtype=torch.float32)
        else:
            out = torch.empty(len(rows), 3, size, size, dtype=torch.uint8)
        description = description or f"decoding {'clips' if self.modality == 'audio' else 'images'}"
        starts = range(0, len(rows), batch_size)
        for start in track(list(starts), description=description, enabled=progress and len(rows) > batch_size):
            part = rows[start:start + batch_size]
            out[start:start + len(part)] = next(self.batches(part, size, batch_size, seconds))
        return out

    def lazy(self, size: int = CANONICAL_SIZE, seconds: float | None = None) -> "LazyImages | LazyClips":
        """The split's images (or clips) as a tensor-like that decodes the rows it is indexed with."""
        return LazyClips(self, seconds) if self.modality == "audio" else LazyImages(self, size)

    def digest(self) -> str:
        """sha256 over the identity of the rows and their labels (no image is decoded)."""
        h = hashlib.sha256(self.identity.encode())
        h.update(self.labels.to(torch.int64).numpy().tobytes())
        return h.hexdigest()

    def require(self, modality: str, model: str) -> None:
        """Refuse this split for a model of another modality ("image" / "audio"), in one line naming the fix."""
        if modality == self.modality:
            return
        if self.modality == "audio":
            raise InvalidInputError(f"{self.source} ({self.name}) holds sound clips, but {model} is an {modality}-text "
                                    "model; give it an image folder (DIR/{train,test}/CLASS/*.png) or an hf: data set "
                                    "with an Image column, or use an audio-text model")
        raise InvalidInputError(f"{self.source} ({self.name}) holds images, but {model} is an {modality}-text model; "
                                "give it a folder of sound files (DIR/{train,test}/CLASS/*.wav) or an hf: data set "
                                "with an Audio column, or use an image-text model")

    def _require_audio(self) -> None:
        if self.modality != "audio":
            raise InvalidInputError(f"{self.source} ({self.name}) holds images, not sound; it has no clip length")


class LazyImages:
    """(n, 3, S, S) uint8 images of a split, decoded on indexing: `x[idx]` decodes the rows idx only.

    Enough of a tensor for `platonic.finetuning.finetune` (len, indexing with an index tensor), so a
    fine-tune draws its batches from a split of any size; `materialise()` decodes all rows at once.
    `key` names what the rows decode to (the data part of a cached fine-tune's key).
    """

    def __init__(self, split: Split, size: int = CANONICAL_SIZE):
        self.split, self.size = split, size

    def __len__(self) -> int:
        return len(self.split)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (len(self.split), 3, self.size, self.size)

    @property
    def key(self) -> str:
        return str(self.size)

    def _decode(self, rows) -> torch.Tensor:
        return self.split.decode(rows, self.size)

    def __getitem__(self, index) -> torch.Tensor:
        if isinstance(index, int):
            return self._decode([index])[0]
        if isinstance(index, slice):
            index = torch.arange(len(self))[index]
        return self._decode(torch.as_tensor(index, dtype=torch.long))

    def materialise(self, progress: bool = False) -> torch.Tensor:
        return self.split.decode(None, self.size, progress=progress)

    def digest(self) -> str:
        """What the rows decode to, named without decoding one: the split's digest and the decoded form."""
        return hashlib.sha256(f"lazy|{self.split.digest()}@{self.key}".encode()).hexdigest()


class LazyClips(LazyImages):
    """(n, T) float32 canonical clips (16 kHz) of an audio split, decoded on indexing, as `LazyImages`.

    T = `split.clip_samples(seconds)`, fixed when made (seconds None: the split's longest clip, capped at 10 s)."""

    def __init__(self, split: Split, seconds: float | None = None):
        self.split, self.size = split, None
        self.samples = split.clip_samples(seconds)
        self.seconds = self.samples / CANONICAL_RATE

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.split), self.samples)

    @property
    def key(self) -> str:
        return f"{self.samples}@{CANONICAL_RATE}Hz"

    def _decode(self, rows) -> torch.Tensor:
        return self.split.decode(rows, seconds=self.seconds)

    def materialise(self, progress: bool = False) -> torch.Tensor:
        return self.split.decode(None, seconds=self.seconds, progress=progress)
