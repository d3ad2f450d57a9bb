"""Labelled image (or sound) data behind one string: the `data:` field of a task and `--task NAME=SOURCE`.

    data/eurosat                      an image folder: DIR/{train,test[,val]}/CLASS/*.png, or DIR/CLASS/*.png
    data/esc50                        a sound folder: DIR/{train,test[,val]}/CLASS/*.wav|flac|ogg, or DIR/CLASS/*.wav
    hf:tanganke/eurosat[@REV]         a Hugging Face data set (`datasets.load_dataset`) with an Image or an Audio
                                      column; hf:ORG/NAME:CONFIG@REV names a configuration; hf:DIR a data set saved
                                      with `save_to_disk`
    torchvision:MNIST@data/mnist      a torchvision data set class on a local root (download=False)

A source gives its splits (`splits()`) and each split (`split(name)`) as a `Split`: the labels (n,) and
the class names, read *without decoding any image* (folder paths, the label column of the Arrow table,
the `targets` a torchvision data set keeps), plus a way to decode chosen rows. Only the rows a caller
asks for are decoded, in batches (`Split.decode`, `Split.lazy`), so memory follows the number of images
used (probes, evaluated images), not the size of the split. Images are made canonical the reference
code's way (`platonic.data.images`): (n, 3, S, S) uint8. Sound becomes canonical clips (n, T) float32,
16 kHz mono, one length T per split (`platonic.data.audio`: the model's `canonical_seconds`, else the
split's longest clip capped at 10 s). A folder is a sound folder when its class folders hold sound files;
one that holds both images and sound is refused (`Split.modality`, `Split.require`).

Split names: "train", "test", and "val" (also found as "validation" / "valid"). A source with a single
split (a torchvision EuroSAT, a folder without split folders, one saved `Dataset`) is cut into train and
test as the reference code cuts EuroSAT: a permutation seeded with 42, its first 80% train, the rest test
(`task_split`). A control reads "test" (or "val"), else its only split whole (`control_split`).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import torch

from ..errors import InvalidInputError
from ..models.audio import AUDIO_SUFFIXES, CANONICAL_RATE, audio_seconds
from ..models.images import CANONICAL_SIZE, IMAGE_SUFFIXES
from ..progress import track
from .audio import clip_samples, decode_clips
from .images import decode_batch

PREFIXES = ("hf:", "torchvision:")
SPLIT_ALIASES = {"train": ("train",), "test": ("test",), "val": ("val", "validation", "valid")}
CUT_SEED, CUT_TRAIN_FRACTION = 42, 0.8  # the reference code's cut of a single-split data set (EuroSAT)
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

    Enough of a tensor for `platonic.finetune.finetune` (len, indexing with an index tensor), so a
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


# -- sources ---------------------------------------------------------------------------------------

class FolderSource:
    """DIR/{train,test[,val]}/CLASS/* or DIR/CLASS/*; classes are the class folders of test (or of DIR)."""

    kind = "folder"

    def __init__(self, root):
        self.root = Path(root)
        self.text = str(self.root)

    def _split_dir(self, name: str) -> Path | None:
        for alias in SPLIT_ALIASES.get(name, (name,)):
            if (self.root / alias).is_dir():
                return self.root / alias
        return None

    def splits(self) -> list[str]:
        self._require()
        found = [name for name in ("train", "test", "val") if self._split_dir(name) is not None]
        return found or ["all"]

    def _require(self) -> None:
        if not self.root.is_dir():
            raise InvalidInputError(f"data folder {self.root} not found; give DIR/{{train,test}}/CLASS/*.png (or "
                                    "*.wav), hf:ORG/NAME or torchvision:NAME@ROOT")

    def classes(self) -> list[str]:
        """The class folder names of the test split (or of DIR itself), sorted."""
        base = self._split_dir("test") if "test" in self.splits() else self.root
        return [p.name for p in _class_folders(base)]

    def split(self, name: str) -> Split:
        splits = self.splits()
        if name not in splits:
            raise InvalidInputError(f"{self.root} has no {name} split (it has: {', '.join(splits)}); add "
                                    f"{self.root}/{name}/CLASS/*.png")
        folder = self.root if name == "all" else self._split_dir(name)
        classes = self.classes()
        found = {p.name: p for p in _class_folders(folder)}
        unknown = sorted(set(found) - set(classes))
        if unknown:
            raise InvalidInputError(f"{folder} has class folder(s) {', '.join(unknown)} that the test split lacks")
        per_class = {cls: _data_files(found[cls]) for cls in classes if cls in found}
        modality = _folder_modality(folder, per_class)
        files, labels = [], []
        for label, cls in enumerate(classes):
            these = per_class.get(cls, {}).get(modality, [])
            files += these
            labels += [label] * len(these)
        if not files:
            raise InvalidInputError(f"{folder} holds no image or sound files of the classes {', '.join(classes)} "
                                    f"(images: {', '.join(sorted(IMAGE_SUFFIXES))}; sound: {', '.join(AUDIO_SUFFIXES)})")
        h = hashlib.sha256()
        for f in files:
            h.update(f"{f.relative_to(self.root)}\t{f.stat().st_size}\n".encode())
        longest = functools.cache(lambda: max(audio_seconds(f) for f in files)) if modality == "audio" else None
        return Split(self.text, name, torch.tensor(labels), tuple(classes), lambda rows: [files[i] for i in rows],
                     f"folder:{h.hexdigest()}", modality, longest)


def _class_folders(folder: Path) -> list[Path]:
    classes = sorted(p for p in folder.iterdir() if p.is_dir())
    if not classes:
        raise InvalidInputError(f"{folder} has no class folders: expected {folder}/CLASS/*.png or CLASS/*.wav (one "
                                "folder per class)")
    return classes


def _data_files(folder: Path) -> dict[str, list[Path]]:
    """The image and the sound files below a class folder, each sorted by path: {"image": [...], "audio": [...]}."""
    found = {"image": [], "audio": []}
    for p in sorted(folder.rglob("*")):
        suffix = p.suffix.lower()
        if suffix in IMAGE_SUFFIXES:
            found["image"].append(p)
        elif suffix in AUDIO_SUFFIXES and p.is_file():
            found["audio"].append(p)
    return found


def _folder_modality(folder: Path, per_class: dict[str, dict[str, list[Path]]]) -> str:
    """"audio" when the class folders hold sound files, else "image"; both kinds in one folder is an error."""
    images = [f for kinds in per_class.values() for f in kinds["image"]]
    sounds = [f for kinds in per_class.values() for f in kinds["audio"]]
    if images and sounds:
        raise InvalidInputError(f"{folder} mixes image files (e.g. {images[0].relative_to(folder)}) and sound files "
                                f"(e.g. {sounds[0].relative_to(folder)}); keep one kind per data folder: images for "
                                "image-text models, sound for audio-text models")
    return "audio" if sounds else "image"


class HFSource:
    """A Hugging Face data set: ORG/NAME[:CONFIG][@REV] from the hub, or a directory saved with `save_to_disk`.

    The image column is the first `datasets.Image` feature; the label column is `label_column`, else
    "label", else the only `ClassLabel` feature. Class names are that ClassLabel's names.
    """

    kind = "hf"

    def __init__(self, spec: str, label_column: str | None = None, prefer: str | None = None):
        self.text = f"hf:{spec}"
        self.label_column, self.prefer = label_column, prefer  # prefer: used where the data set has it
        name, at, revision = spec.partition("@")
        self.revision = revision or None
        if at and not revision:
            raise InvalidInputError(f"{self.text}: give a revision after '@' (a commit, tag or branch), or drop the '@'")
        self.local = _looks_local(name)
        if self.local:
            self.name, self.config = name, None
        else:
            self.name, _, config = name.partition(":")
            self.config = config or None
            if self.name.count("/") > 1 or not self.name.strip("/"):
                raise InvalidInputError(f"{self.text}: write hf:ORG/NAME[:CONFIG][@REV] or hf:DIRECTORY (a data set "
                                        "saved with save_to_disk)")
        self._dict = None

    def _load(self):
        if self._dict is not None:
            return self._dict
        try:
            import datasets
        except ImportError:
            raise InvalidInputError(f"{self.text} needs the `datasets` package: pip install datasets") from None
        try:
            if self.local:
                if not Path(self.name).is_dir():
                    raise InvalidInputError(f"{self.text}: no such directory {self.name} (a data set saved with "
                                            "save_to_disk)")
                loaded = datasets.load_from_disk(self.name)
            else:
                loaded = datasets.load_dataset(self.name, self.config, revision=self.revision)
        except InvalidInputError:
            raise
        except Exception as exc:  # noqa: BLE001 - datasets raises many types (not found, offline, bad config)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InvalidInputError(f"cannot load the Hugging Face data set {self.text} ({type(exc).__name__}: "
                                    f"{first}); check the name, revision and configuration, or that it is cached "
                                    "when offline") from None
        if isinstance(loaded, datasets.Dataset):
            loaded = {str(loaded.split) if loaded.split else "all": loaded}
        self._dict = dict(loaded)
        return self._dict

    def splits(self) -> list[str]:
        return list(self._load())

    def _dataset(self, name: str):
        splits = self._load()
        for alias in SPLIT_ALIASES.get(name, (name,)):
            if alias in splits:
                return alias, splits[alias]
        raise InvalidInputError(f"{self.text} has no {name} split (it has: {', '.join(splits)})")

    def split(self, name: str) -> Split:
        import datasets

        actual, ds = self._dataset(name)
        feats = ds.features
        images = [c for c, f in feats.items() if isinstance(f, datasets.Image)]
        sounds = [c for c, f in feats.items() if isinstance(f, datasets.Audio)]
        if images and sounds:
            raise InvalidInputError(f"{self.text} ({actual}) has an image column ({images[0]}) and an audio column "
                                    f"({sounds[0]}); save a copy with one of them (Dataset.remove_columns)")
        if not images and not sounds:
            raise InvalidInputError(f"{self.text} ({actual}) has no image or audio column (columns: {', '.join(feats)})")
        label = self._label_column(feats, actual)
        labels = torch.tensor(list(ds[label]), dtype=torch.long)
        names = tuple(feats[label].names) if isinstance(feats[label], datasets.ClassLabel) else None
        column = (images or sounds)[0]
        # the stored bytes / paths, decoded by platonic (images: PIL; sound: soundfile, not datasets' torchcodec)
        raw = ds.cast_column(column, datasets.Image(decode=False) if images else datasets.Audio(decode=False))
        fingerprint = getattr(ds, "_fingerprint", "") or ""
        identity = f"{self.text}/{actual}:{self.revision or fingerprint}"
        fetch = lambda rows: raw[list(rows)][column] if rows else []  # noqa: E731
        if images:
            return Split(self.text, actual, labels, names, fetch, identity)
        return Split(self.text, actual, labels, names, fetch, identity, "audio",
                     functools.cache(lambda: _longest_record(raw, column)))

    def _label_column(self, feats, split: str) -> str:
        import datasets

        if self.label_column is not None:
            if self.label_column not in feats:
                raise InvalidInputError(f"{self.text} ({split}) has no column {self.label_column!r} "
                                        f"(columns: {', '.join(feats)})")
            return self.label_column
        class_labels = [c for c, f in feats.items() if isinstance(f, datasets.ClassLabel)]
        if self.prefer in feats:
            return self.prefer
        if "label" in feats and ("label" in class_labels or _is_int(feats["label"])):
            return "label"
        if len(class_labels) == 1:
            return class_labels[0]
        if class_labels:
            raise InvalidInputError(f"{self.text} ({split}) has several label columns ({', '.join(class_labels)}); "
                                    "name one with label_column in the task's config")
        raise InvalidInputError(f"{self.text} ({split}) has no label column (no ClassLabel feature and no integer "
                                f"'label'; columns: {', '.join(feats)}); platonic needs labelled data")


def _longest_record(ds, column: str, batch: int = 256) -> float:
    """Seconds of the longest sound of an `Audio(decode=False)` column, from headers, `batch` rows at a time."""
    longest = 0.0
    for start in range(0, len(ds), batch):
        for record in ds[start:start + batch][column]:
            longest = max(longest, audio_seconds(record))
    return longest


def _is_int(feature) -> bool:
    return getattr(feature, "dtype", "").startswith(("int", "uint"))


def _looks_local(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).is_dir()


class TorchvisionSource:
    """A torchvision data set class on a local root: NAME@ROOT, constructed with download=False."""

    kind = "torchvision"

    def __init__(self, spec: str):
        self.text = f"torchvision:{spec}"
        name, at, root = spec.partition("@")
        if not at or not name or not root:
            raise InvalidInputError(f"{self.text}: write torchvision:NAME@ROOT, e.g. torchvision:MNIST@data/mnist")
        import torchvision.datasets as tvd

        cls = getattr(tvd, name, None)
        if not (inspect.isclass(cls) and issubclass(cls, torch.utils.data.Dataset)):
            raise InvalidInputError(f"torchvision.datasets has no data set class {name!r} (e.g. MNIST, CIFAR100, "
                                    "DTD, GTSRB, SVHN, EuroSAT, SUN397, StanfordCars, ImageFolder)")
        self.name, self.root, self.cls = name, Path(root).expanduser(), cls
        self.params = inspect.signature(cls.__init__).parameters

    def splits(self) -> list[str]:
        if "split" in self.params:
            return ["train", "test", "val"]
        if "train" in self.params:
            return ["train", "test"]
        return ["all"]

    def _construct(self, name: str):
        kwargs = {"download": False} if "download" in self.params else {}
        if "split" in self.params:
            kwargs["split"] = name
        elif "train" in self.params:
            if name not in ("train", "test"):
                raise InvalidInputError(f"{self.text} has no {name} split (it has: train, test)")
            kwargs["train"] = name == "train"
        elif name != "all":
            raise InvalidInputError(f"{self.text} has no {name} split (it has one: all)")
        if not self.root.is_dir():
            raise InvalidInputError(f"{self.text}: the root {self.root} does not exist (platonic never downloads)")
        try:
            return self.cls(str(self.root), **kwargs)
        except (RuntimeError, FileNotFoundError, ValueError, OSError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InvalidInputError(f"cannot read {self.text} ({name} split): {first}") from None

    def split(self, name: str) -> Split:
        ds = self._construct(name)
        labels = _torchvision_labels(ds)
        if labels is None:
            raise InvalidInputError(f"{self.text}: cannot read its labels without decoding every image (it keeps no "
                                    "targets / labels list); use an image folder or hf: source instead")
        names = getattr(ds, "classes", None)
        identity = f"{self.text}/{name}:{len(labels)}:{type(ds).__name__}"
        return Split(self.text, name, labels, tuple(str(c) for c in names) if names else None,
                     lambda rows: [ds[i][0] for i in rows], identity)


def _torchvision_labels(ds) -> torch.Tensor | None:
    for attr in ("targets", "labels", "_labels"):
        value = getattr(ds, attr, None)
        if value is not None and len(value) == len(ds):
            return torch.as_tensor(value, dtype=torch.long).clone()
    for attr in ("_samples", "samples", "imgs"):
        value = getattr(ds, attr, None)
        if value is not None and len(value) == len(ds):
            return torch.tensor([int(s[1]) for s in value], dtype=torch.long)
    return None


def parse_source(text, label_column: str | None = None, prefer_label: str | None = None):
    """The data source a `data:` string names (module docstring): a FolderSource, HFSource or TorchvisionSource.

    label_column: the hf: column that holds the labels (else "label" or the only ClassLabel);
    prefer_label: a column used where the data set has it (a registry entry's, e.g. CIFAR-100's fine_label)."""
    text = str(text)
    if text.startswith("hf:"):
        return HFSource(text[3:], label_column, prefer_label)
    if text.startswith("torchvision:"):
        if label_column is not None:
            raise InvalidInputError(f"label_column applies to hf: sources; {text} reads its data set's own labels")
        return TorchvisionSource(text[len("torchvision:"):])
    if label_column is not None:
        raise InvalidInputError("label_column applies to hf: sources; a data folder's labels are its class folders")
    return FolderSource(text)


def is_folder(text) -> bool:
    return not str(text).startswith(PREFIXES)


def resolve_source_paths(text, root: Path) -> str:
    """`text` with a relative local path read from `root` (an image folder, hf:DIR, torchvision:NAME@ROOT).

    Hub names (hf:ORG/NAME) are unchanged; hf:PATH is local when it starts with '.', '/' or '~' or when
    root / PATH is a directory."""
    def at(p: str) -> str:
        path = Path(p).expanduser()
        return str(path if path.is_absolute() else root / path)

    text = str(text)
    if text.startswith("hf:"):
        name, at_sign, rev = text[3:].partition("@")
        if name.startswith((".", "/", "~")) or (root / name).is_dir():
            return f"hf:{at(name)}{at_sign}{rev}"
        return text
    if text.startswith("torchvision:"):
        name, at_sign, where = text[len("torchvision:"):].partition("@")
        return f"torchvision:{name}@{at(where)}" if at_sign else text
    return at(text)


def missing_path(text) -> str | None:
    """A message when the source's local path does not exist (checked before any model loads), else None."""
    text = str(text)
    if text.startswith("hf:"):
        name = text[3:].partition("@")[0]
        return f"no such directory {name}" if name.startswith((".", "/", "~")) and not Path(name).expanduser().is_dir() else None
    if text.startswith("torchvision:"):
        where = text.partition("@")[2]
        return f"the root {where} does not exist" if where and not Path(where).expanduser().is_dir() else None
    return None if Path(text).is_dir() else "not found"


# -- the splits a task and a control read -----------------------------------------------------------

def task_split(source, role: str) -> Split | None:
    """The task's `role` split ("train", "test" or "val"): the source's own, or, for a source with a
    single split, the reference code's seeded 80 / 20 cut of it (val: None)."""
    splits = source.splits()
    if len(splits) == 1 and role in ("train", "test"):
        whole = source.split(splits[0])
        order = torch.randperm(len(whole), generator=torch.Generator().manual_seed(CUT_SEED))
        cut = int(CUT_TRAIN_FRACTION * len(whole))
        return whole.subset(order[:cut] if role == "train" else order[cut:], role)
    if role == "val":
        if not any(a in splits for a in SPLIT_ALIASES["val"]):
            return None
        if source.kind == "torchvision":
            try:
                return source.split("val")
            except InvalidInputError:
                return None
    return source.split(role)


def control_split(source) -> Split:
    """A control's split: "test", else "val", else the source's only split, whole."""
    splits = source.splits()
    for role in ("test", "val"):
        if any(a in splits for a in SPLIT_ALIASES[role]):
            return source.split(role)
    if len(splits) == 1:
        return source.split(splits[0])
    raise InvalidInputError(f"{source.text} has no test split for a control (it has: {', '.join(splits)})")
