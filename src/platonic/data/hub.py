"""Hugging Face data sets as data sources: hf:ORG/NAME[:CONFIG][@REV] (`datasets.load_dataset`) or hf:DIR
(`save_to_disk`), with an Image or an Audio column; labels are read from the Arrow table, nothing decoded."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from ..errors import InvalidInputError
from ..models.audio import audio_seconds
from .splits import SPLIT_ALIASES, Split


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
