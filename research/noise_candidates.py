"""Research harness (not part of the package, not tested): candidate noise-colour tasks on the old bases.

Renders a candidate noise set (train 96 / test 32 per class, the full profile's sizes) with a patched
noise generator, measures each old base's zero-shot on its test split, then one full fine-tune (the
world's source recipe, settings given) per model named in FT on the candidate train split.
Usage: python research/noise_candidates.py WORLD '{"jitter":0.3,...}' 'cnn,wav' '{"steps":120,"lr":2e-3}'
"""
import json, sys, time
from pathlib import Path
import numpy as np
import torch
torch.set_num_threads(1)
from platonic.world.audio import build as B, procedural as P, dataset as DS, canonical
from platonic.world.audio.zoo import SPECS, MODEL_NAMES
from platonic.world.audio.tasks import TASK_NAMES
from platonic.world.common.jobs import set_determinism
from platonic.finetuning import finetune
from platonic.experiments.setups import audio_world_parts
from platonic.experiments.engine import ExperimentSetup, EvalSet
from platonic.experiments.engine import FeatureStore
from platonic.metrics import top1

world, params, ft_models, ft_over = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
SR, T = P.SR, P.T


def noise(label, rng, colours=tuple(P.NOISE_EXPONENT)):
    p = params
    f = np.fft.rfftfreq(T, 1 / SR); f[0] = f[1]
    e = P.NOISE_EXPONENT[colours[label]] * p.get("scale", 1.0) + rng.uniform(-p.get("jitter", 0.0), p.get("jitter", 0.0))
    shape = f ** (e / 2)
    if p.get("band"):
        lo = np.exp(rng.uniform(np.log(p["lo"][0]), np.log(p["lo"][1])))
        hi = np.exp(rng.uniform(np.log(p["hi"][0]), np.log(p["hi"][1])))
        shape = shape / np.sqrt(1 + (lo / f) ** 4) / np.sqrt(1 + (f / hi) ** 4)
    x = np.fft.irfft(np.fft.rfft(rng.standard_normal(T)) * shape, n=T)
    x = x / np.abs(x).max()
    env = np.zeros(T)
    dur = int(rng.uniform(*p.get("dur", (1.0, 1.0))) * SR)
    start = int(rng.integers(0, T - dur + 1))
    seg = np.ones(dur)
    fi, fo = int(rng.uniform(0.005, min(0.2, dur / SR / 3)) * SR), int(rng.uniform(0.005, min(0.2, dur / SR / 3)) * SR)
    seg[:fi] = np.linspace(0, 1, fi); seg[dur - fo:] = np.linspace(1, 0, fo)
    env[start:start + dur] = seg
    fl = p.get("floor", (0.002, 0.01))
    floor = rng.standard_normal(T) * np.exp(rng.uniform(np.log(fl[0]), np.log(fl[1])))
    return (x * env + floor).astype(np.float32)


P.GENERATORS["noise"] = noise
t0 = time.perf_counter()
splits = {s: DS.render_split("noise", s, n, 0) for s, n in (("train", 96), ("test", 32))}
rt = time.perf_counter() - t0
parts = audio_world_parts(world)
prompts = tuple(parts.data["noise"].task.prompts)
test = EvalSet("noise", splits["test"].clips, splits["test"].labels, prompts)
store = FeatureStore(ExperimentSetup("n", parts.models, {}, {}, {}))
zs = {m: round(100 * store.accuracy(m, test), 1) for m in parts.models}
ft = {}
for m in [x for x in ft_models.split(",") if x]:
    set_determinism(1)
    spec = SPECS[m]
    seed = B.model_seed(spec, 0)
    cfg = B.PROFILES["full"].sources["full"].model_copy(update={**ft_over, "seed": seed * 100 + TASK_NAMES.index("noise") * 2})
    replay = B.replay_pool(parts.data, "noise", 32, seed)
    tuned, _ = finetune(parts.models[m], splits["train"].clips, splits["train"].labels, prompts, cfg, progress=False, replay_inputs=replay)
    z = store.cache.probes(tuned, test.inputs, progress=False).z.double()
    ft[m] = round(100 * top1(z, store.prompt_embeddings(m, test), test.labels), 1)
print(json.dumps(dict(params=params, zs=zs, ft=ft, render_s=round(rt, 2))), flush=True)
