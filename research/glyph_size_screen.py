"""Screen (issue 33, item 4): are the trunk world's glyph tasks limited by their 32 px rendering or by their
40 training typefaces? A linear probe on EfficientNet-Lite0's frozen pooled features (1,280-d), per glyph task,
for glyphs rendered at 32 px (the world's canonical side; the model resizes them bilinearly to 64) or natively at
64 px (`render_glyph(side=64)`: every length of the renderer doubled), with 40 or more training typefaces.

    [GLYPH_INPUT=96] python research/glyph_size_screen.py [fonts ...]      # default: 40 120; input 64 px

Prints one row per (render side, train fonts): probe top-1 per task and the mean. Test: 40 test typefaces, one
rendering each (the world's full profile). Nothing here is in the package.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

from platonic.experiments.checks import linear_probe
from platonic.world.image.glyphs import render_glyph, split_fonts, usable_fonts
from platonic.world.image.tasks import DIGITS, LOWER, SYMBOL_CHARS, UPPER
from platonic.world.image.trunks import load_trunk

TASKS = {"digits": DIGITS, "upper": UPPER, "lower": LOWER, "symbols": SYMBOL_CHARS}
INPUT = int(os.environ.get("GLYPH_INPUT", 64))  # the trunk's input side


def render_set(chars, fonts, side, seed):
    rng = np.random.default_rng(seed)
    imgs, labels = [], []
    for font in fonts:
        for k, c in enumerate(chars):
            imgs.append(render_glyph(font, c, rng, side))
            labels.append(k)
    return torch.from_numpy(np.stack(imgs)), torch.tensor(labels)


@torch.inference_mode()
def features(trunk, images):
    out = []
    for i in range(0, len(images), 256):
        x = images[i:i + 256].float()
        if x.shape[-1] != INPUT:
            x = torch.nn.functional.interpolate(x, size=(INPUT, INPUT), mode="bilinear", align_corners=False)
        out.append(trunk((x - 127.0) / 128.0))
    return torch.cat(out)


def main():
    counts = [int(a) for a in sys.argv[1:]] or [40, 120]
    torch.manual_seed(0)
    fonts = split_fonts(usable_fonts())
    print({k: len(v) for k, v in fonts.items()})
    trunk = load_trunk("efficientnet-lite0")
    test_fonts = fonts["test"][:40]
    rows = []
    for side in (32, 64):
        for n in counts:
            t0 = time.time()
            accs = {}
            for ti, (name, chars) in enumerate(TASKS.items()):
                xtr, ytr = render_set(chars, fonts["train"][:n], side, [ti, 0])
                xte, yte = render_set(chars, test_fonts, side, [ti, 1])
                accs[name] = 100 * linear_probe(features(trunk, xtr), ytr, features(trunk, xte), yte, len(chars))
            mean = sum(accs.values()) / len(accs)
            rows.append((side, min(n, len(fonts["train"])), accs, mean, time.time() - t0))
            print(f"side {side} fonts {rows[-1][1]}: " + " ".join(f"{k} {v:.1f}" for k, v in accs.items())
                  + f" | mean {mean:.1f} ({rows[-1][4]:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
