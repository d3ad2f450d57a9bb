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
(`task_split`); a single test or val split is never cut into a train part. A control reads "test" (or "val"), else its only split whole (`control_split`).
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..errors import InvalidInputError
from .folders import FolderSource
from .hub import HFSource
from .splits import SPLIT_ALIASES, LazyClips, LazyImages, Split
from .torchvision_source import TorchvisionSource

PREFIXES = ("hf:", "torchvision:")
CUT_SEED, CUT_TRAIN_FRACTION = 42, 0.8  # the reference code's cut of a single-split data set (EuroSAT)
CUT_SPLITS = ("all", "train")  # a single split cut into train and test: a whole data set, or a train split alone

__all__ = ["CUT_SEED", "CUT_TRAIN_FRACTION", "PREFIXES", "SPLIT_ALIASES", "FolderSource", "HFSource", "LazyClips",
           "LazyImages", "Split", "TorchvisionSource", "control_split", "is_folder", "missing_path", "parse_source",
           "resolve_source_paths", "task_split"]


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
    """The task's `role` split ("train", "test" or "val"): the source's own, or, for a source whose single
    split is a whole data set or a train split, the reference code's seeded 80 / 20 cut of it (val: None).

    A source with a test (or val) split and no train split is never cut: its test images would be
    trained on. Asked for "train", it is refused with the splits it has (a folder: the folders it
    found); asked for "test", it gives its test split whole."""
    splits = source.splits()
    if len(splits) == 1 and splits[0] in CUT_SPLITS and role in ("train", "test"):
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
