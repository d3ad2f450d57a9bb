"""The procedural tasks' variants (`procedural.VARIANTS`): the default draws as the world always has, the harder
variants are the research screen's renderers (research/hard_tasks_screen.py), and `build_data` passes a recipe's
variants through and refuses unknown ones, naming the known."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from platonic.errors import InvalidInputError
from platonic.world.image import data as wd
from platonic.world.image import procedural

SCREEN = Path(__file__).resolve().parents[2] / "research" / "hard_tasks_screen.py"
HARDER = {"shapes": "small-lowc", "textures": "lowc-noise-rot"}


@pytest.fixture(scope="module")
def screen():
    threads = torch.get_num_threads()  # the script sets one thread on import
    spec = importlib.util.spec_from_file_location("hard_tasks_screen", SCREEN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.set_num_threads(threads)
    return module


def test_the_registry_names_the_world_and_the_harder_variants():
    assert set(procedural.VARIANTS) == set(procedural.PROCEDURAL)
    for name, render in procedural.PROCEDURAL.items():
        assert procedural.VARIANTS[name]["world"] is render
    assert set(procedural.VARIANTS["shapes"]) == {"world", "small-lowc"}
    assert set(procedural.VARIANTS["textures"]) == {"world", "lowc-noise-rot"}


@pytest.mark.parametrize("name", sorted(procedural.PROCEDURAL))
def test_the_default_is_the_world_variant(name):
    plain = procedural.make_procedural(name, 3, np.random.default_rng(7))
    named = procedural.make_procedural(name, 3, np.random.default_rng(7), variant="world")
    assert torch.equal(plain.images, named.images) and torch.equal(plain.labels, named.labels)
    rng = np.random.default_rng(7)  # make_procedural as it was before the variants
    labels = rng.permutation(np.repeat(np.arange(wd.TASKS[name].n_classes), 3))
    assert np.array_equal(plain.images.numpy(), np.stack([procedural.PROCEDURAL[name](int(y), rng) for y in labels]))
    assert np.array_equal(plain.labels.numpy(), labels)


@pytest.mark.parametrize("name,variant", sorted(HARDER.items()))
def test_a_variant_draws_balanced_canonical_images(name, variant):
    split = procedural.make_procedural(name, 3, np.random.default_rng(0), variant)
    k = wd.TASKS[name].n_classes
    assert split.images.shape == (3 * k, 3, 32, 32) and split.images.dtype == torch.uint8
    assert split.labels.dtype == torch.int64
    assert torch.equal(torch.bincount(split.labels, minlength=k), torch.full((k,), 3))
    world = procedural.make_procedural(name, 3, np.random.default_rng(0))
    assert torch.equal(split.labels, world.labels) and not torch.equal(split.images, world.images)


def test_the_variants_are_the_screens_renderers(screen):
    theirs = {"shapes": screen.shape_renderer(4, 8, 45, 0, 10),
              "textures": screen.texture_renderer(40, 3, 10, 18, 0.35)}
    for name, variant in HARDER.items():
        mine = procedural.VARIANTS[name][variant]
        assert screen.CANDIDATES[name][variant] is mine
        for seed in range(3):
            for label in range(wd.TASKS[name].n_classes):
                a, b = np.random.default_rng([seed, label]), np.random.default_rng([seed, label])
                assert np.array_equal(mine(label, a), theirs[name](label, b))
                assert a.random() == b.random()  # the same draws, in the same order


def test_an_unknown_variant_is_refused_naming_the_known():
    with pytest.raises(InvalidInputError, match="world, small-lowc"):
        procedural.make_procedural("shapes", 1, np.random.default_rng(0), "tiny")
    with pytest.raises(InvalidInputError, match="world, lowc-noise-rot"):
        procedural.make_procedural("textures", 1, np.random.default_rng(0), "small-lowc")


SIZES = wd.DataSizes(1, 1, 1, 1, 1, 1)


def dummy(n_classes):
    return wd.ImageSplit(torch.zeros(n_classes, 3, 32, 32, dtype=torch.uint8), torch.arange(n_classes))


def stub_drawing(monkeypatch, make_procedural, render_glyph_set, fonts):
    """build_data with every drawing replaced: the procedural tasks and glyph sets by the given stubs, fonts split as
    `fonts`, Fashion-MNIST and the icons by blank images."""
    monkeypatch.setattr(wd, "make_procedural", make_procedural)
    monkeypatch.setattr(wd, "usable_fonts", lambda: [])
    monkeypatch.setattr(wd, "split_fonts", lambda _: fonts)
    monkeypatch.setattr(wd, "load_fashion", lambda sizes, rng: {s: dummy(10) for s in ("train", "val", "test")})
    monkeypatch.setattr(wd, "render_glyph_set", render_glyph_set)
    icons = dummy(wd.CONTROLS["objects"].n_classes)
    monkeypatch.setattr(wd, "render_icon_set", lambda split, n, rng: (icons.images, icons.labels))


@pytest.mark.parametrize("variants,known", [({"digits": "world"}, "shapes, colours, counting, textures"),
                                            ({"shapes": "lowc-noise-rot"}, "world, small-lowc")])
def test_build_data_refuses_unknown_variants_before_drawing(monkeypatch, variants, known):
    monkeypatch.setattr(wd, "require_debian_data", lambda: pytest.fail("checked after the data"))
    with pytest.raises(InvalidInputError, match=known):
        wd.build_data(SIZES, 0, progress=False, variants=variants)


def test_build_data_passes_the_variants_to_the_procedural_tasks(monkeypatch):
    drawn = []

    def make_procedural(name, per_class, rng, variant):
        drawn.append((name, variant))
        return dummy(wd.TASKS[name].n_classes)

    stub_drawing(monkeypatch, make_procedural, lambda chars, fonts, n, rng: dummy(len(chars)),
                 {"train": [], "val": [], "test": []})
    wd.build_data(SIZES, 0, progress=False, variants={"shapes": "small-lowc"})
    expect = {name: HARDER["shapes"] if name == "shapes" else "world" for name in procedural.PROCEDURAL}
    assert sorted(drawn) == sorted((name, variant) for name, variant in expect.items() for _ in range(3))
    drawn.clear()
    wd.build_data(SIZES, 0, progress=False)
    assert {variant for _, variant in drawn} == {"world"} and len(drawn) == 3 * len(procedural.PROCEDURAL)


@pytest.mark.parametrize("max_fonts, train_fonts, expect", [(None, None, (9, 7, 5)), (4, None, (4, 4, 4)),
                                                             (4, 6, (6, 4, 4)), (None, 2, (2, 7, 5))])
def test_build_data_caps_the_training_typefaces_apart(monkeypatch, max_fonts, train_fonts, expect):
    """train_fonts caps the glyph tasks' train split; val and test keep the sizes' max_fonts."""
    fonts = {"train": [f"t{i}" for i in range(9)], "val": [f"v{i}" for i in range(7)], "test": [f"s{i}" for i in range(5)]}
    seen = []

    def render_glyph_set(chars, used, n, rng):
        seen.append(len(used))
        return dummy(len(chars))

    stub_drawing(monkeypatch, lambda name, per_class, rng, variant: dummy(wd.TASKS[name].n_classes), render_glyph_set,
                 fonts)
    sizes = wd.DataSizes(1, 1, 1, 1, 1, 1, max_fonts=max_fonts)
    wd.build_data(sizes, 0, progress=False, train_fonts=train_fonts)
    assert seen == list(expect) * 4  # digits, upper, lower, symbols: train, val, test each
