"""A trunk world model that fine-tunes as its LiT base was pre-trained and its sources were: frozen below the cut.

The trunk world's models are LiT bases: pre-training trained only the tower above the cut (`tower.Above`), its
full sources train the same part with batch-norm statistics frozen. A plain fine-tune of `world:trunk/NAME`
(`platonic.finetuning.finetune`) would instead train the whole trunk on 64 px images (about 50 s for 20 steps
on a CPU). `FrozenTrunkEncoder` is the same model with the part below the cut frozen, so that the library's own
fine-tunes (task arithmetic's flavours, OrthoReg) move what the world's sources move:

    z(x) = Above(visual)(A(x)),   A(x) = below(a frozen copy of the trunk below the cut, x)

A(x) of a canonical image x (3, s, s) uint8 is the tower's input (`prepare_probes`); it is computed once per image
and kept (`FROZEN_ACTIVATIONS`, a `shared.ActivationCache` keyed by the frozen part's digest, the dtype and the
image's bytes), in eval mode,
without gradients or autocast, so a fine-tune's steps run only the part above the cut (`_forward_tower`), whose
batch norms keep their running statistics in training too. Parameters below the cut never receive a gradient,
so every fine-tune flavour (full; linear: the tangent model of the part above) leaves them at theta_0.
Embeddings equal the open_clip model's (`visual(x)`) up to kernel order (batches differ).
"""

from __future__ import annotations

import copy
import hashlib
import json

import torch
from torch import nn

from ....errors import InvalidInputError
from ....hashing import update_with_tensor
from .shared import ActivationCache, SharedTrunkEncoder
from .tower import Above, cut_of, model_input

CACHE_BYTES = 2 << 30  # 2 GiB: the trunk world's splits for three models take about 0.3 GiB


FROZEN_ACTIVATIONS = ActivationCache(CACHE_BYTES)  # (frozen part, image digest) -> A(x) (C, h, w)


def _image_key(image: torch.Tensor) -> str:
    return hashlib.sha256(image.contiguous().numpy().tobytes()).hexdigest()


class _FrozenBelow(nn.Module):
    """A copy of the tower below the cut (`tower.cut_of(visual).below`: an EfficientNet's stem and every stage but
    the last, a ModifiedResNet's stem and layer1-3), eval mode, no gradients: (B, 3, S, S) model input ->
    (B, C, h, w), as `tower.below`."""

    def __init__(self, visual: nn.Module):
        super().__init__()
        self.parts = nn.Sequential(*copy.deepcopy(cut_of(visual).below(visual)))
        self.requires_grad_(False)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.parts(x)


class _InputSpec:
    """What `tower.model_input` reads of a world model's spec: its input size and normalisation."""

    def __init__(self, encoder: SharedTrunkEncoder):
        cfg = encoder.preprocess_cfg
        self.image_size = encoder.image_size[0]
        self.mean, self.std = tuple(cfg["mean"]), tuple(cfg["std"])


class FrozenTrunkEncoder(SharedTrunkEncoder):
    """A trunk world model (`world:trunk/NAME`) with the part below the cut frozen (module doc).

    Its inputs are canonical images, as any model's; its fingerprint names the frozen form (fine-tunes of it are
    not those of the open_clip model). Build one with `frozen_trunk_model`."""

    def architecture_id(self) -> str:
        return super().architecture_id() + "/frozen-below-the-cut"

    def prepare_probes(self, probes: torch.Tensor) -> torch.Tensor:
        """Canonical images (B, 3, s, s) -> the tower's input A(x) (B, C, h, w), on the model's device."""
        return self.frozen_activations(probes).to(self.device, self.dtype)

    def frozen_activations(self, images: torch.Tensor) -> torch.Tensor:
        """A(x) (B, C, h, w) float32 on the CPU of canonical images (B, 3, s, s), from the cache or computed (and
        kept)."""
        images, part = images.cpu(), self._cache_part()
        keys = [_image_key(x) for x in images]
        rows = [FROZEN_ACTIVATIONS.peek((part, k)) for k in keys]
        missing = [i for i, r in enumerate(rows) if r is None]
        if missing:
            with torch.inference_mode(False), torch.no_grad(), torch.autocast(self.device.type, enabled=False):
                x = model_input(images[missing], self._input).to(self.device, self.dtype)
                fresh = self._frozen.to(self.device, self.dtype)(x).float().cpu()  # where the model is now
            for i, row in zip(missing, fresh):
                FROZEN_ACTIVATIONS.put((part, keys[i]), row)
                rows[i] = row
        return torch.stack(rows)

    def runs_in_forward(self, module: nn.Module) -> bool:
        """Only the part above the cut runs (`tower.Above`): ATT-FT and LoRA-ATT adapt the attention there."""
        return any(module is m for m in Above(self.model.visual).modules())

    def _cache_part(self) -> str:
        """The cache's name for the frozen part as it runs now: its weights' digest and the model's dtype."""
        return f"{self._part}/{self.dtype}"

    def _forward_tower(self, inputs: torch.Tensor) -> torch.Tensor:
        """A(x) (B, C, h, w) -> (B, d) through the part above the cut."""
        above = Above(self.model.visual)
        for module in above.modules():  # statistics frozen, as the world's sources train (affine parameters train)
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.eval()
        return above(inputs)


def frozen_trunk_model(encoder: SharedTrunkEncoder, remember: tuple[torch.Tensor, torch.Tensor] | None = None
                       ) -> FrozenTrunkEncoder:
    """`encoder` (a loaded `world:trunk/NAME`, left as it is) with its part below the cut frozen.

    remember: (canonical images (n, 3, s, s), their A(x) (n, C, h, w)) to keep without computing them, e.g. the
    build's cached train activations (`activations/NAME.safetensors`, computed by the same frozen part)."""
    frozen = FrozenTrunkEncoder(copy.deepcopy(encoder.model), encoder.arch, encoder.spec, tokenizer=encoder._tokenizer)
    frozen.canonical_size = encoder.canonical_size
    frozen._frozen = _FrozenBelow(frozen.model.visual)
    frozen._input = _InputSpec(frozen)
    h = hashlib.sha256(json.dumps([frozen._input.image_size, frozen._input.mean, frozen._input.std]).encode())
    for name, tensor in frozen._frozen.state_dict().items():
        update_with_tensor(h, tensor, name)
    frozen._part = h.hexdigest()
    if remember is not None:
        images, acts = remember
        if len(images) != len(acts):
            raise InvalidInputError(f"{len(images)} images but {len(acts)} activations to remember; give one per image")
        part = frozen._cache_part()
        for image, row in zip(images.cpu(), acts.float().cpu()):
            FROZEN_ACTIVATIONS.put((part, _image_key(image)), row)
    return frozen
