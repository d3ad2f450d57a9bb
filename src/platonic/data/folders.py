"""Image and sound folders as data sources: DIR/{train,test[,val]}/CLASS/FILE, or DIR/CLASS/FILE (one split)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import torch

from ..errors import InvalidInputError
from ..models.audio import AUDIO_SUFFIXES, audio_seconds
from ..models.images import IMAGE_SUFFIXES
from .splits import SPLIT_ALIASES, Split


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
            folders = sorted(p.name for p in self.root.iterdir() if p.is_dir())
            raise InvalidInputError(f"{self.root} has no {name} split: it holds the folder(s) {', '.join(folders)} "
                                    f"(read as split(s): {', '.join(splits)}); put the {name} images in "
                                    f"{self.root}/{name}/CLASS/*.png" + (" (a fine-tune never trains on a test split)"
                                                                         if name == "train" else ""))
        folder = self.root if name == "all" else self._split_dir(name)
        classes = self.classes()
        found = {p.name: p for p in _class_folders(folder)}
        unknown = sorted(set(found) - set(classes))
        if unknown:
            raise InvalidInputError(f"{folder} has class folder(s) {', '.join(unknown)} that the test split lacks")
        per_class = {cls: _data_files(found[cls]) for cls in classes if cls in found}
        empty = [cls for cls, kinds in per_class.items() if not (kinds["image"] or kinds["audio"])]
        if empty:
            raise InvalidInputError(f"{folder} has empty class folder(s) {', '.join(empty)} (no image or sound "
                                    "file); add its files or remove the folder")
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
