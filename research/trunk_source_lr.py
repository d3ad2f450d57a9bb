"""Research harness (not part of the package, not tested): the trunk world's last-stage sources at other learning
rates (or other settings of the source recipe: steps, batch, replay, ...), screened on the built trunk world's
cached activations before any rebuild (issue 33).

For one model of a built trunk world (`platonic world trunk-path`), trains its sources of one kind ("full" or "lora";
the package's `trunkworld.sources.train_source`, the profile's recipe with the settings replaced) for every task,
and prints the fine-tune gain, the oracle (own descriptor solved on the model, alpha 1: own gain, other tasks'
mean change), recovery (sum oracle gains / sum fine-tune gains) and locality (mean fall of the other tasks / own
gain), the report's definitions, on the test splits (unit embeddings, the closed form `platonic.solve`).

Usage: python research/trunk_source_lr.py MODEL KIND SETTING [SETTING ...]
  SETTING: a learning rate (3e-4) or FIELD=VALUE[,FIELD=VALUE] of `SourceRecipe` (steps=150,replay_batch=16)
  e.g. lite0-linear full 3e-4 1.5e-4; lite1-attn full steps=150 steps=200
  WORLD=DIR: a built trunk world to screen on (default: the current recipe's, built when missing)
"""
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from platonic import solve
from platonic.world.backend import load_world_model
from platonic.world.common.weights import load_weights
from platonic.world.image.data import TASK_NAMES
from platonic.world.image.trunkworld.build import ensure_trunk_world, model_spec, read_data, replay_activations
from platonic.world.image.build import KINDS
from platonic.world.image.trunkworld.recipe import PROFILES
from platonic.world.image.trunkworld.sources import train_source
from platonic.world.image.trunkworld.tower import Above, activations

torch.set_num_threads(1)


def acc(z, G, y):
    return 100.0 * float(((z @ G.T).argmax(1) == y).double().mean())


if __name__ == "__main__":
    name, kind, settings = sys.argv[1], sys.argv[2], sys.argv[3:]
    world = ensure_trunk_world("full") if "WORLD" not in os.environ else Path(os.environ["WORLD"])
    data = read_data(world)
    acts, _ = load_weights(world / "activations" / f"{name}.safetensors")
    enc = load_world_model(f"trunk/{name}", root=world)
    visual, spec = enc.model.visual, model_spec(name, 0)
    scale = enc.model.logit_scale.detach().exp().item()
    G = {t: F.normalize(enc.encode_texts(list(data[t].task.prompts)), dim=-1) for t in TASK_NAMES}
    test = {t: activations(visual, data[t].test.images, spec) for t in TASK_NAMES}
    probes = {t: acts[t][data[t].probe_index] for t in TASK_NAMES}

    def unit(above, a):
        with torch.no_grad():
            return F.normalize(above(a), dim=-1).double()

    base = Above(visual)
    z0 = {t: unit(base, test[t]) for t in TASK_NAMES}
    p0 = {t: unit(base, probes[t]) for t in TASK_NAMES}
    zs = {t: acc(z0[t], G[t].double(), data[t].test.labels) for t in TASK_NAMES}
    for setting in settings:
        t0 = time.time()
        fields = dict(kv.split("=") for kv in setting.split(",")) if "=" in setting else {"lr": setting}
        default = PROFILES["full"].sources[kind]
        changes = {k: type(getattr(default, k))(v) for k, v in fields.items()}
        recipe = replace(default, **changes)
        gains, own, other = {}, {}, {}
        for t in TASK_NAMES:
            seed = spec.seed * 100 + TASK_NAMES.index(t) * 2 + KINDS.index(kind)
            state = train_source(visual, kind, acts[t], data[t].train.labels, F.normalize(G[t], dim=-1), scale,
                                 replay_activations(acts, t, recipe.replay_per_task, seed), recipe, seed)
            tuned = Above(visual, copy=True)
            tuned.load_state_dict({k: state[tuned.model_name(k)] for k in tuned.state_dict()})
            tuned.eval()
            Gt = G[t].double()
            gains[t] = acc(unit(tuned, test[t]), Gt, data[t].test.labels) - zs[t]
            X = solve(p0[t], Gt, (unit(tuned, probes[t]) - p0[t]) @ Gt.T)
            ch = {s: acc(F.normalize(z0[s] + z0[s] @ X, dim=-1), G[s].double(), data[s].test.labels) - zs[s]
                  for s in TASK_NAMES}
            own[t], other[t] = ch[t], sum(ch[s] for s in TASK_NAMES if s != t) / 7
        rec = sum(own.values()) / sum(gains.values())
        loc = sum(-min(0, v) for v in other.values()) / 8 / (sum(own.values()) / 8)
        print(json.dumps({"model": name, "kind": kind, **changes, "gain": round(sum(gains.values()) / 8, 1),
                          "oracle_own": round(sum(own.values()) / 8, 1), "others": round(sum(other.values()) / 8, 1),
                          "recovery": round(rec, 3), "locality": round(loc, 3), "seconds": round(time.time() - t0)}),
              flush=True)
