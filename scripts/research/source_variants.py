"""Research harness (not part of the package, not tested): one model's eight full sources fine-tuned another
way, then diagnosed by `one_model_world.mini` (gain, cells under the probe, recovery, locality, damage).

Variants (each monkeypatches `platonic.finetune` in this process only; the world's recipe is untouched):
- `lpft LR1 STEPS1 LR2 STEPS2`: LP-FT (Kumar et al., 2022). Stage 1 trains only the edit site's parameters
  (the last linear map onto the embedding: vit's proj, resnet's / convnext's head, map-vit's head.fc2,
  the mixer's appended linear) at LR1 for STEPS1 steps, no weight decay; stage 2 runs the world's full-source
  recipe from the stage-1 model at LR2 for STEPS2 steps. Both stages keep the replay term. STEPS2 = 0
  keeps the stage-1 source alone: a last-layer linear edit that the replay keeps off the other tasks.
- `layer_decay DECAY`: the world's full-source recipe with layer-wise lr decay: parameters of `blocks.k`
  at lr * DECAY^(L + 1 - (k + 1)), those before the blocks at lr * DECAY^(L + 1), those after at lr
  (ViT and mixer names; L the number of blocks).
Base weights are copied from $PLATONIC_RESEARCH_WORLD (a built world or `bases_only.py`'s directory);
the scratch world is $PLATONIC_RESEARCH_OUT/w-TAG (as for one_model_world.py).
Usage: python scripts/research/source_variants.py vit-a lpft-a lpft 1e-2 128 3e-4 128
"""
import importlib, os, re, shutil, sys
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)
FT = importlib.import_module("platonic.finetune")  # the module (the package re-exports the function under its name)
import one_model_world as O
from platonic.world import build as B, data as D, zoo as Z
from platonic.world.zoo import save_weights, load_weights, model_from_state

name, tag, variant, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
base_world = Path(os.environ["PLATONIC_RESEARCH_WORLD"])
W2 = Path(os.environ.get("PLATONIC_RESEARCH_OUT", "/tmp/platonic-research")) / f"w-{tag}"
(W2 / "models" / name / "ft").mkdir(parents=True, exist_ok=True)
if not (W2 / "models" / name / "base.safetensors").exists():
    shutil.copy(base_world / "models" / name / "base.safetensors", W2 / "models" / name / "base.safetensors")

_trainable, _AdamW = FT._trainable, torch.optim.AdamW
SITE_ONLY = {"on": False}
NAMES: dict[int, str] = {}


def trainable(ft, mode):
    """The edit site's parameters alone in LP-FT's stage 1 (appended identities included); else the recipe's."""
    if SITE_ONLY["on"]:
        ids = {id(t) for t in ft.edit_site.tensors().values()}
        return [(k, p) for k, p in ft.tower.named_parameters() if id(p) in ids]
    named = _trainable(ft, mode)
    NAMES.clear()
    NAMES.update({id(p): k for k, p in named})
    return named


def layer_decay_adamw(decay: float):
    def make(params, lr, weight_decay):
        params = list(params)
        depth = {}
        for p in params:
            m = re.search(r"blocks\.(\d+)\.", NAMES[id(p)])
            depth[id(p)] = int(m.group(1)) + 1 if m else (0 if re.match(r"(patch|pos|cls)", NAMES[id(p)]) else None)
        L = max(v for v in depth.values() if v is not None)
        groups: dict[float, list] = {}
        for p in params:
            d = depth[id(p)]
            groups.setdefault(1.0 if d is None else decay ** (L + 1 - d), []).append(p)
        return _AdamW([{"params": v, "lr": lr * k} for k, v in groups.items()], lr=lr, weight_decay=weight_decay)
    return make


FT._trainable = trainable
if variant == "layer_decay":
    torch.optim.AdamW = layer_decay_adamw(float(args[0]))
elif variant != "lpft":
    raise SystemExit(f"unknown variant {variant!r}: lpft or layer_decay")

data, prof, spec = O.scr.data, B.PROFILES["full"], Z.SPECS[name]
model = model_from_state(spec, load_weights(W2 / "models" / name / "base.safetensors")[0], f"world:{name}")
recipe = prof.sources["full"]
for i, t in enumerate(D.TASK_NAMES):
    out = W2 / "models" / name / "ft" / f"{t}.full.safetensors"
    if out.exists():
        continue
    replay = B.replay_pool(data, t, prof.replay_per_task, B._model_seed(spec, 0))
    seed = B._model_seed(spec, 0) * 100 + i * 2  # the build's seed of this (model, task)'s full source
    fit = lambda m, **update: FT.finetune(m, data[t].train.images, data[t].train.labels, data[t].task.prompts,
                                          recipe.model_copy(update={"seed": seed, **update}), progress=False, replay_inputs=replay)[0]
    if variant == "lpft":
        lr1, steps1, lr2, steps2 = float(args[0]), int(args[1]), float(args[2]), int(args[3])
        SITE_ONLY["on"] = True
        tuned = fit(model, lr=lr1, steps=steps1, weight_decay=0.0)
        SITE_ONLY["on"] = False
        if steps2:
            tuned = fit(tuned, lr=lr2, steps=steps2)
    else:
        tuned = fit(model)
    save_weights(out, tuned.tower.state_dict(), {"kind": "full", "variant": [variant, *args]})
    print("fine-tuned", t, flush=True)
O.mini(name, tag, base_from=str(base_world))
