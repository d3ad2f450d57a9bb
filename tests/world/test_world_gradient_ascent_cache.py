"""The world's gradient-ascent negation baseline reads its fine-tunes from the cache on a second run."""

import torch

from platonic.experiments.engine import finetune_cache
from platonic.experiments.setups.world import world_data, ascended
from platonic.models import load_model
from platonic.world.image.data import TASKS


def test_a_second_gradient_ascent_trains_nothing_and_gives_the_same_weights(tiny_world, monkeypatch):
    data = world_data(tiny_world["path"])
    train = data["shapes"].train
    model = load_model("world:vit-a")
    first, hit = ascended(model, "shapes", train.images, train.labels, TASKS["shapes"].prompts)
    assert not hit

    def no_training(*args, **kwargs):
        raise AssertionError("the cached gradient ascent was trained again")

    monkeypatch.setattr(finetune_cache, "finetune", no_training)
    second, hit = ascended(model, "shapes", train.images, train.labels, TASKS["shapes"].prompts)
    assert hit
    changed = False
    for (name, a), b, p in zip(first.module.state_dict().items(), second.module.state_dict().values(),
                               model.module.state_dict().values()):
        assert torch.equal(a, b), name
        changed |= not torch.equal(a, p)
    assert changed, "the baseline moved the weights"
