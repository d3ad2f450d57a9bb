"""Research harness (not part of the package, not tested): screen the trunk world's emoji control (issue 33 item 4,
the many-class control) on one model's cached activations before a rebuild.

Lite0's LiT pre-training (the build's `pretrain_heads`, the full profile's recipe, the build's seeds) runs again on
the cached train activations of a partial build of the first trunk-2 draft (ecf1d198d5e8:
`activations/lite0-linear.safetensors`, data.safetensors, captions.safetensors), with the emoji control's split
and caption naming varied:
- split "held-out": as that draft built it (each class's train split shows two designs, its test split the third:
  class k's design k mod 3);
- split "same": every design in train (8 renderings each, the third design's renderings drawn anew) and a test split
  of new renderings of all three designs (4 each per class);
- emoji naming rate: the captions of the emoji set name the class `rate` of the time (the other sets keep 0.03).
Prints zero-shot on every set's test split per variant (all 3 controls, the 8 tasks), one line a variant.

The lab note's figures (docs/lab/2026-12-06-emoji-control.md) were measured before `CaptionDraw` took
`set_name_rates`, by a subclass of it here that drew the same way (its rates held as float32).

Usage: python research/emoji_control_screen.py WORLD_DIR VARIANT...   VARIANT = SPLIT:RATE, e.g. held-out:0.03
"""
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from platonic.world.image import emoji
from platonic.world.image.data import CONTROLS, TASKS
from platonic.world.image.openclip_models import build_openclip_model
from platonic.world.image.trunkworld import build as B
from platonic.world.image.trunkworld.pretrain import CaptionDraw, pretrain_heads
from platonic.world.image.trunkworld.recipe import PROFILES
from platonic.world.image.trunkworld.tower import Above, activations

torch.set_num_threads(1)
NAME = "lite0-linear"


def same_design_split(seed: int):
    """(train images, labels, test images, labels): every design in both, renderings drawn anew."""
    rng = np.random.default_rng([seed, 4242])
    tr, trl, te, tel = [], [], [], []
    for k in range(len(emoji.EMOJI)):
        for d, (_, _, mono, _) in emoji.DESIGNS.items():
            m = emoji.emoji_master(d, k)
            tr += [emoji.render_icon(m, rng, ink=mono) for _ in range(8)]
            trl += [k] * 8
            te += [emoji.render_icon(m, rng, ink=mono) for _ in range(4)]
            tel += [k] * 4
    return (torch.from_numpy(np.stack(tr)), torch.tensor(trl), torch.from_numpy(np.stack(te)), torch.tensor(tel))


def main(world: Path, variants: list[str]) -> None:
    prof = PROFILES["full"]
    data, (vocab, text) = B.read_data(world), B.read_captions(world)
    spec = B.model_spec(NAME, 0)
    from safetensors.torch import load_file
    acts = load_file(str(world / "activations" / f"{NAME}.safetensors"))
    model0 = build_openclip_model(spec)
    test_acts = {s: activations(model0.visual, data[s].test.images, spec) for s in B.SETS}
    same = same_design_split(0)
    same_train_acts = activations(model0.visual, same[0], spec)
    same_test_acts = activations(model0.visual, same[2], spec)
    index = {c: i for i, c in enumerate(vocab)}
    for variant in variants:
        split, rate = variant.split(":")
        t0 = time.perf_counter()
        model = build_openclip_model(spec)
        train = dict(acts)
        labels = {s: data[s].train.labels for s in B.SETS}
        tests = {s: (test_acts[s], data[s].test.labels) for s in B.SETS}
        if split == "same":
            train["emoji"], labels["emoji"] = same_train_acts, same[1]
            tests["emoji"] = (same_test_acts, same[3])
        with torch.no_grad():
            features = [Above(model.visual).trunk_features(train[s]) for s in B.SETS]
        draw = CaptionDraw(list(B.SETS), vocab, [labels[s] for s in B.SETS], prof.pretrain.name_rate,
                           prof.pretrain.hint_rate, spec.seed + 1, set_name_rates={"emoji": float(rate)})
        torch.manual_seed(spec.seed)
        pretrain_heads(model, NAME, features, draw, text, prof.pretrain)
        model.eval()
        out = {}
        with torch.no_grad():
            for s, (a, y) in tests.items():
                z = F.normalize(Above(model.visual)(a), dim=-1)
                prompts = (CONTROLS.get(s) or TASKS[s]).prompts
                g = F.normalize(model.text.proj(text[[index[p] for p in prompts]]), dim=-1)
                out[s] = 100 * float(((z @ g.T).argmax(1) == y).float().mean())
        tasks = np.mean([out[t] for t in TASKS])
        print(f"{variant}: emoji {out['emoji']:.1f} objects {out['objects']:.1f} symbols {out['symbols']:.1f} "
              f"tasks mean {tasks:.1f} | " + " ".join(f"{t} {out[t]:.1f}" for t in TASKS)
              + f" ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
