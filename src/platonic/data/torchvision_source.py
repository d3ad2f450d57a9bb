"""torchvision data set classes on a local root as data sources: torchvision:NAME@ROOT (download=False)."""

from __future__ import annotations

import inspect
from pathlib import Path

import torch

from ..errors import InvalidInputError
from .splits import Split


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
