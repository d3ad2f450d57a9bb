"""The objects control: icons of everyday objects from Debian icon themes, split by theme family."""

import hashlib

import numpy as np
import pytest

from platonic.errors import MissingDataError
from platonic.world.image import data as wd
from platonic.world.image import icons


def test_theme_splits_are_disjoint_families():
    themes = {split: {t for family in fams for t in family} for split, fams in icons.THEME_SPLITS.items()}
    assert not themes["train"] & themes["val"] and not themes["train"] & themes["test"] and not themes["val"] & themes["test"]
    assert all(themes.values())


def test_every_split_draws_every_object_and_no_drawing_is_shared_across_splits():
    masters = {split: icons.icon_masters(split) for split in icons.THEME_SPLITS}
    digests = {}
    for split, per_class in masters.items():
        assert len(per_class) == len(icons.OBJECT_NAMES) and all(per_class)
        for ms in per_class:
            assert all(m.shape == (icons.MASTER, icons.MASTER, 4) and m.dtype == np.uint8 and m[..., 3].max() > 0 for m in ms)
            keys = [hashlib.sha256(m.tobytes()).digest() for m in ms]
            assert len(set(keys)) == len(keys)  # duplicates within a class are dropped
        digests[split] = {hashlib.sha256(m.tobytes()).digest() for ms in per_class for m in ms}
    assert not digests["train"] & digests["test"] and not digests["train"] & digests["val"]
    assert sum(len(ms) for ms in masters["train"]) > 5 * len(icons.OBJECT_NAMES)  # several styles per object


def test_renderings_are_canonical_uint8_and_seeded():
    master = icons.icon_masters("test")[0][0]
    a = icons.render_icon(master, np.random.default_rng(3))
    assert a.shape == (3, wd.CANONICAL_SIZE, wd.CANONICAL_SIZE) and a.dtype == np.uint8
    assert np.array_equal(a, icons.render_icon(master, np.random.default_rng(3)))
    images, labels = icons.render_icon_set("val", 2, np.random.default_rng(0))
    assert images.shape[0] == labels.shape[0] == 2 * sum(len(ms) for ms in icons.icon_masters("val"))
    assert set(labels.tolist()) == set(range(len(icons.OBJECT_NAMES)))


def test_objects_control_is_the_icons_and_shares_no_class_with_a_task():
    objects = wd.CONTROLS["objects"]
    assert objects.classes == icons.OBJECT_NAMES and objects.role == "control"
    task_classes = {c.lower() for t in wd.TASKS.values() for c in t.classes}
    assert not task_classes & {c.lower() for c in objects.classes}


def test_missing_theme_or_renderer_names_the_packages(monkeypatch, tmp_path):
    monkeypatch.setattr(icons, "ICON_ROOT", tmp_path)
    with pytest.raises(MissingDataError, match="oxygen-icon-theme"):
        icons.require_icons()
    monkeypatch.undo()
    monkeypatch.setattr(icons.shutil, "which", lambda name: None)
    with pytest.raises(MissingDataError, match="librsvg2-bin"):
        wd.require_debian_data()
