"""Probe images of more than 8 bits per channel are scaled to 8 bits, not clipped (issue 12)."""

import numpy as np
import torch


def test_16_bit_greyscale_images_are_scaled_not_clipped(tmp_path):
    from PIL import Image

    from platonic.models.images import canonical_images

    ramp = np.tile(np.linspace(0, 65535, 224).astype(np.uint16), (224, 1))
    Image.fromarray(ramp).save(tmp_path / "grey16.png")
    with Image.open(tmp_path / "grey16.png") as img:
        assert img.mode.startswith("I")  # PIL opens it as 16-bit
    # the shorter-side path keeps a 224 x 224 image's geometry, so the pixels are the ramp scaled to 8 bits
    x = canonical_images(tmp_path, resize="shorter-side")[0]
    assert x.shape == (3, 224, 224) and torch.equal(x[0], x[1])
    expected = torch.from_numpy(np.rint(ramp / 257.0).astype(np.uint8))
    assert (x[0].int() - expected.int()).abs().max() <= 1
    assert int(x[0, 0, 112]) < 140  # the middle of the ramp is mid-grey, not white
    # the default (the reference's Resize 256 + CenterCrop 224) scales the same way, then resizes the 8-bit ramp
    from platonic.models.images import paper_canonical

    y = canonical_images(tmp_path)[0]
    assert y.shape == (3, 224, 224) and (y[0].int() - y[1].int()).abs().max() <= 1  # grey, up to the bundle's truncation
    eight_bit = paper_canonical(Image.fromarray(np.rint(ramp / 257.0).astype(np.uint8)))
    assert (y.int() - eight_bit.int()).abs().max() <= 1
    assert int(y[0, 0, 112]) < 140
