"""Folder probes are made as the reference code makes its probe bundle (issue 35, item 4): Resize 256 +
CenterCrop 224, then each model's own preprocessing; the earlier shorter-side path stays behind a flag."""

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from platonic import InvalidInputError
from platonic.data.probe_files import load_probes
from platonic.models.constants import OPENAI_MEAN, OPENAI_STD
from platonic.models.images import canonical_images, to_model_input


def _framed(width=256, height=320, frame=40, seed=0):
    """A noisy grey image with a red frame along its top `frame` rows."""
    g = np.random.default_rng(seed)
    a = (96 + 64 * g.random((height, width, 3))).astype(np.uint8)
    a[:frame] = (255, 0, 0)
    return Image.fromarray(a)


def _reference_port(img, size=224):
    """pta/data/transforms.py eval_transform at 224 (Resize(int(224 * 256 / 224)), CenterCrop, ToTensor,
    Normalize), then pta/features.py's store: de-normalise, clamp, times 255, truncate to uint8."""
    x = T.Compose([T.Resize(int(size * 256 / 224)), T.CenterCrop(size), T.ToTensor(), T.Normalize(OPENAI_MEAN, OPENAI_STD)])(
        img.convert("RGB"))
    std, mean = torch.tensor(OPENAI_STD).view(3, 1, 1), torch.tensor(OPENAI_MEAN).view(3, 1, 1)
    return ((x * std + mean).clamp(0, 1) * 255).to(torch.uint8), x


def _shorter_side_port(img, size=224):
    """The earlier path: shorter side to `size` (PIL bilinear, rounded sizes), then the centre crop."""
    w, h = img.size
    s = size / min(w, h)
    img = img.convert("RGB").resize((max(size, round(w * s)), max(size, round(h * s))), Image.BILINEAR)
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    return torch.from_numpy(np.asarray(img.crop((left, top, left + size, top + size))).copy()).permute(2, 0, 1)


@pytest.fixture
def folder(tmp_path):
    images = [_framed(seed=0), _framed(300, 200, frame=10, seed=1), _framed(224, 224, frame=5, seed=2)]
    for i, img in enumerate(images):
        img.save(tmp_path / f"{i}.png")
    return tmp_path, images


def test_folder_probes_are_the_reference_bundle_then_the_models_own_preprocessing(folder):
    path, images = folder
    probes = load_probes(path)
    for i, img in enumerate(images):
        stored, normalised = _reference_port(img)
        assert torch.equal(probes[i], stored)
        # the model's own preprocessing at 224 (no resize): the reference's normalised input, up to the
        # bundle's truncation to uint8 (at most one level)
        x = to_model_input(probes[i : i + 1], 224, OPENAI_MEAN, OPENAI_STD)[0]
        assert float((x - normalised).abs().max()) <= 1 / 255 / min(OPENAI_STD) + 1e-6


def test_a_frame_along_the_top_is_cropped_as_the_reference_crops_it(folder):
    path, images = folder
    new, old = load_probes(path)[0], load_probes(path, resize="shorter-side")[0]
    red = lambda p: int(((p[0] > 200) & (p[1] < 50) & (p[2] < 50)).any(dim=1).sum())  # noqa: E731  rows with red
    assert red(_shorter_side_port(images[0])) > 0 and red(old) == red(_shorter_side_port(images[0]))  # it survived before
    assert red(new) == 0 == red(_reference_port(images[0])[0])  # the reference crops it, and so do we now
    assert torch.equal(old, _shorter_side_port(images[0]))  # the flag keeps the earlier pixels (and digests)
    assert float((new.float() - old.float()).abs().mean()) > 5  # not a rounding difference


def test_tensors_are_pixels_already_and_the_flag_is_checked(folder):
    path, _ = folder
    x = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(canonical_images(x, 32), canonical_images(x, 32, resize="shorter-side"))  # the world's probes
    with pytest.raises(InvalidInputError, match="probe resize is one of reference, shorter-side"):
        load_probes(path, resize="antialiased")
