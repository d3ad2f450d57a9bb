"""The world's data: tasks, controls, fonts, probes, and the error when a Debian package is missing."""

import pytest
import torch

from platonic.data.probes import probe_indices
from platonic.world.image import data as wd
from platonic.world.image import glyphs


def test_eight_tasks_two_controls_each_with_one_template():
    assert len(wd.TASKS) >= 8 and len(wd.CONTROLS) >= 2
    for task in wd.all_sets().values():
        assert task.template.count("{}") == 1
        assert len(set(task.prompts)) == task.n_classes == len(task.hints)
    assert set(wd.RELATED_GROUP) <= set(wd.TASKS) and wd.HELD_OUT_RELATED in wd.TASKS
    assert wd.HELD_OUT_RELATED not in wd.RELATED_GROUP
    real = {t.source for t in wd.TASKS.values()}
    assert {"fashion-mnist", "aenigma"} <= real and sum(t.source != "procedural" for t in wd.TASKS.values()) >= 3


def test_probe_draw_is_seeded_permutation_30_per_class():
    idx = probe_indices(1000, 10)
    assert idx.shape == (300,) and len(set(idx.tolist())) == 300
    assert torch.equal(idx, probe_indices(1000, 10))
    assert torch.equal(idx, torch.randperm(1000, generator=torch.Generator().manual_seed(42))[:300])


def test_font_splits_are_disjoint_families():
    fonts = [p for p in sorted(glyphs.AENIGMA_DIR.glob("*.ttf"))[:60]]
    split = glyphs.split_fonts(fonts)
    names = {k: {p.stem for p in v} for k, v in split.items()}
    assert not names["train"] & names["test"] and not names["train"] & names["val"] and not names["val"] & names["test"]
    assert names["test"]


def test_glyph_and_procedural_images_are_canonical_uint8():
    import numpy as np

    rng = np.random.default_rng(0)
    font = sorted(glyphs.AENIGMA_DIR.glob("*.ttf"))[0]
    g = glyphs.render_glyph(font, "A", rng)
    assert g.shape == (3, wd.CANONICAL_SIZE, wd.CANONICAL_SIZE) and g.dtype == np.uint8 and g.max() > 100
    for name in wd.PROCEDURAL:
        s = wd.make_procedural(name, 2, rng)
        assert s.images.shape == (2 * wd.TASKS[name].n_classes, 3, 32, 32) and s.images.dtype == torch.uint8


def test_a_glyph_drawn_at_twice_the_side_is_the_same_drawing_scaled():
    """render_glyph(side=64) draws what side 32 draws with every length doubled: the same random draws (tint), and
    its ink box about twice as large."""
    import numpy as np

    font = sorted(glyphs.AENIGMA_DIR.glob("*.ttf"))[0]
    small = glyphs.render_glyph(font, "W", np.random.default_rng(3))
    large = glyphs.render_glyph(font, "W", np.random.default_rng(3), side=64)
    assert large.shape == (3, 64, 64) and large.dtype == np.uint8
    assert (small.reshape(3, -1).max(1) == large.reshape(3, -1).max(1)).all()  # the same ink colour

    def extent(img):
        rows, cols = np.nonzero(img.max(0) > img.min() + 40)
        return np.ptp(rows) + 1, np.ptp(cols) + 1

    (h32, w32), (h64, w64) = extent(small), extent(large)
    assert 1.6 <= h64 / h32 <= 2.4 and 1.6 <= w64 / w32 <= 2.4


@pytest.mark.parametrize("module,attr,package", [(wd, "FASHION_DIR", "dataset-fashion-mnist"),
                                                 (glyphs, "AENIGMA_DIR", "fonts-aenigma"),
                                                 (glyphs, "DEJAVU_DIR", "fonts-dejavu-core")])
def test_missing_debian_package_is_named(monkeypatch, tmp_path, module, attr, package):
    monkeypatch.setattr(module, attr, tmp_path / "absent")
    with pytest.raises(wd.MissingDataError, match=package):
        wd.require_debian_data()


def test_builder_stops_naming_the_package(monkeypatch, tmp_path):
    from platonic.world.image.build import build_world

    monkeypatch.setattr(wd, "FASHION_DIR", tmp_path / "absent")
    with pytest.raises(wd.MissingDataError, match="dataset-fashion-mnist"):
        build_world("tiny", root=tmp_path, progress=False)
    assert not any(tmp_path.glob("world-*"))


def test_captions_name_the_class_only_in_name_pool():
    pools = wd.caption_pools(wd.TASKS["fashion"])
    assert all("sneaker" not in c for c in pools["hint"][7])
    assert any("sneaker" in c for c in pools["name"][7])
    vocab = wd.caption_vocabulary()
    assert vocab == sorted(set(vocab)) and all(p in vocab for t in wd.all_sets().values() for p in t.prompts)
