"""The emoji control: 100 everyday things in three emoji designs, tested on new renderings of the drawings
pre-training saw; the trunk world's many-class control, named in 30 % of its pre-training captions."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from platonic.errors import InvalidInputError, MissingDataError
from platonic.world.image import data as wd
from platonic.world.image import emoji, icons
from platonic.world.image.trunkworld import recipe


def test_a_hundred_things_none_a_class_of_a_task_or_another_control():
    task = wd.CONTROLS["emoji"]
    assert task.role == "control" and task.n_classes == 100 == len(set(emoji.EMOJI_NAMES))
    assert len({cp for _, _, cp in emoji.EMOJI}) == 100
    others = {c.lower() for name, t in wd.CONTROLS.items() if name != "emoji" for c in t.classes}
    others |= {c.lower() for t in wd.TASKS.values() for c in t.classes}
    assert not others & {c.lower() for c in emoji.EMOJI_NAMES}
    assert not set(emoji.EMOJI_HINTS) & set(emoji.EMOJI_NAMES)  # hints name a group, never a class
    assert len(set(emoji.EMOJI_HINTS)) >= 15  # broad: many kinds of thing


def test_every_design_draws_every_thing_as_its_own_drawing():
    emoji.require_emoji()
    for k in range(len(emoji.EMOJI)):
        masters = [emoji.emoji_master(d, k) for d in emoji.DESIGNS]
        for m in masters:
            assert m.shape == (64, 64, 4) and m.dtype == np.uint8 and m[..., 3].max() > 0
        assert len({hashlib.sha256(m.tobytes()).digest() for m in masters}) == len(masters)
    # the fallback drawing a font gives a code point it lacks is not taken for a glyph
    symbola = emoji.DESIGNS["symbola"][0][0]
    assert not emoji.has_glyph(symbola, 96, chr(0x1FAE8))  # Unicode 15: after Symbola's Unicode 9


def test_every_split_shows_every_design_in_renderings_of_its_own():
    rng = np.random.default_rng(0)
    train, train_labels = emoji.render_emoji_set(2, rng)
    test, test_labels = emoji.render_emoji_set(1, rng)
    assert train.shape == (2 * 3 * 100, 3, 32, 32) and test.shape == (3 * 100, 3, 32, 32) and train.dtype == torch.uint8
    assert torch.bincount(train_labels).tolist() == [6] * 100 and torch.bincount(test_labels).tolist() == [3] * 100
    seen = {img.numpy().tobytes() for img in train}
    assert not any(img.numpy().tobytes() in seen for img in test)  # new renderings, never a train image
    again, labels_again = emoji.render_emoji_set(1, np.random.default_rng(0))
    first, labels_first = emoji.render_emoji_set(1, np.random.default_rng(0))
    assert torch.equal(again, first) and torch.equal(labels_again, labels_first)  # seeded


def test_a_one_colour_design_is_inked_to_stand_out_from_its_ground():
    master = emoji.emoji_master("symbola", 0)
    ink = master[..., 3] > 200
    for seed in range(6):
        img = icons.render_icon(master, np.random.default_rng(seed), ink=True).astype(float)
        ground = img[:, :3, :3].mean()  # a corner: the icon is drawn 20-30 px in the middle of 32
        assert abs(img.mean() - ground) > 3 and ink.any()
        lit = img.max(0)
        assert abs(np.percentile(lit, 99 if ground < 128 else 1) - ground) > 60  # the outline, not the noise


def test_build_data_adds_the_control_on_request_and_leaves_every_other_set_as_it_was():
    sizes = wd.DataSizes(2, 1, 1, 1, 1, 2, max_fonts=2, icon_variants_train=1, icon_variants_eval=2)
    plain = wd.build_data(sizes, 0, progress=False, probes_per_class=1)
    with_emoji = wd.build_data(sizes, 0, progress=False, probes_per_class=1, controls=recipe.CONTROL_NAMES)
    assert tuple(plain) == wd.TASK_NAMES + ("symbols", "objects")  # the world of tiny towers: as before
    assert set(with_emoji) == set(plain) | {"emoji"}
    for name, td in plain.items():
        for split in ("train", "val", "test"):
            assert torch.equal(getattr(td, split).images, getattr(with_emoji[name], split).images), (name, split)
    control = with_emoji["emoji"]
    assert len(control.test) == 2 * 100 and len(control.train) == 3 * 100  # control_per_class caps the test split
    back = wd.data_from_tensors(wd.data_to_tensors(with_emoji))
    assert "emoji" in back and torch.equal(back["emoji"].test.images, control.test.images)
    assert "emoji" not in wd.data_from_tensors(wd.data_to_tensors(plain))
    with pytest.raises(InvalidInputError, match="unknown control"):
        wd.build_data(sizes, 0, progress=False, controls=("cifar100",))


def test_the_trunk_worlds_captions_name_the_things_and_the_tiny_worlds_do_not():
    assert "a photo of a tiger." in wd.caption_vocabulary(recipe.CONTROL_NAMES)
    assert "a photo of a tiger." not in wd.caption_vocabulary()


def test_missing_fonts_name_the_packages(monkeypatch, tmp_path):
    monkeypatch.setitem(emoji.DESIGNS, "symbola", ((tmp_path / "Symbola.ttf",), 96, True, 2))
    with pytest.raises(MissingDataError, match="fonts-symbola"):
        emoji.require_emoji()
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    block = makefile.split("DEB_PACKAGES :=", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ")
    assert set(emoji.EMOJI_PACKAGES) <= set(block.split())


def test_the_emoji_captions_name_the_things_at_their_own_rate():
    from platonic.world.image.trunkworld.pretrain import CaptionDraw

    sets = ["shapes", "emoji"]
    vocab = wd.caption_vocabulary(recipe.CONTROL_NAMES)
    labels = [torch.zeros(50, dtype=torch.long), torch.zeros(50, dtype=torch.long)]
    draw = CaptionDraw(sets, vocab, labels, 0.03, 0.4, seed=0, set_name_rates=recipe.CONTROL_NAME_RATES)
    named = {0: [0, 0], 1: [0, 0]}
    for _ in range(200):
        for k, _, caps in draw(64):
            words = [vocab[int(c)] for c in caps]
            named[k][0] += sum(("circle" if k == 0 else "tiger") in w for w in words)
            named[k][1] += len(words)
    assert 0.01 < named[0][0] / named[0][1] < 0.05 and 0.25 < named[1][0] / named[1][1] < 0.35
    assert recipe.PROFILES["full"].pretrain.set_name_rates == {"emoji": 0.3} == recipe.StudentRecipe().set_name_rates
    with pytest.raises(InvalidInputError, match="not drawn"):
        CaptionDraw(sets, vocab, labels, 0.03, 0.4, seed=0, set_name_rates={"objects": 0.5})
