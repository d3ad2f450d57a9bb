"""Research harness (not part of the package, not tested): one model's eight full sources fine-tuned another
way, then diagnosed by `one_model_world.mini` (gain, cells under the probe, recovery, locality, damage).

Variants (through `platonic.finetuning.finetune`'s `parameters=` and `lr_scale=`; the world's recipe is untouched):
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
Usage: python research/source_variants.py vit-a lpft-a lpft 1e-2 128 3e-4 128
"""
import os, re, shutil, sys
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)
import one_model_world as O
from platonic.finetuning import finetune, trainable_parameters
from platonic.world.image import build as B, data as D, zoo as Z
from platonic.world.common.weights import load_weights, save_weights
from platonic.world.image.zoo import model_from_state


def edit_site_only(ft):
    """LP-FT's first stage: the edit site's parameters (an appended identity site included)."""
    ids = {id(t) for t in ft.edit_site.tensors().values()}
    return [(k, p) for k, p in ft.tower.named_parameters() if id(p) in ids]


def layer_decay(decay: float, names: list[str]):
    """lr_scale(name) of layer-wise decay over the blocks of a tower whose trainable parameters are `names`."""
    def depth(name):
        m = re.search(r"blocks\.(\d+)\.", name)
        return int(m.group(1)) + 1 if m else (0 if re.match(r"(patch|pos|cls)", name) else None)
    L = max(d for d in map(depth, names) if d is not None)
    return lambda name: 1.0 if depth(name) is None else decay ** (L + 1 - depth(name))


name, tag, variant, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
base_world = Path(os.environ["PLATONIC_RESEARCH_WORLD"])
W2 = Path(os.environ.get("PLATONIC_RESEARCH_OUT", "/tmp/platonic-research")) / f"w-{tag}"
(W2 / "models" / name / "ft").mkdir(parents=True, exist_ok=True)
if not (W2 / "models" / name / "base.safetensors").exists():
    shutil.copy(base_world / "models" / name / "base.safetensors", W2 / "models" / name / "base.safetensors")

if variant not in ("lpft", "layer_decay"):
    raise SystemExit(f"unknown variant {variant!r}: lpft or layer_decay")

data, prof, spec = O.scr.data, B.PROFILES["full"], Z.SPECS[name]
model = model_from_state(spec, load_weights(W2 / "models" / name / "base.safetensors")[0], f"world:{name}")
recipe = prof.sources["full"]
for i, t in enumerate(D.TASK_NAMES):
    out = W2 / "models" / name / "ft" / f"{t}.full.safetensors"
    if out.exists():
        continue
    replay = B.replay_pool(data, t, prof.replay_per_task, B.model_seed(spec, 0))
    seed = B.model_seed(spec, 0) * 100 + i * 2  # the build's seed of this (model, task)'s full source
    def fit(m, parameters=None, lr_scale=None, **update):
        return finetune(m, data[t].train.images, data[t].train.labels, data[t].task.prompts,
                        recipe.model_copy(update={"seed": seed, **update}), progress=False, replay_inputs=replay,
                        parameters=parameters, lr_scale=lr_scale)[0]
    if variant == "lpft":
        lr1, steps1, lr2, steps2 = float(args[0]), int(args[1]), float(args[2]), int(args[3])
        tuned = fit(model, parameters=edit_site_only, lr=lr1, steps=steps1, weight_decay=0.0)
        if steps2:
            tuned = fit(tuned, lr=lr2, steps=steps2)
    else:
        names = [k for k, _ in trainable_parameters(model, "full")]
        tuned = fit(model, lr_scale=layer_decay(float(args[0]), names))
    save_weights(out, tuned.tower.state_dict(), {"kind": "full", "variant": [variant, *args]})
    print("fine-tuned", t, flush=True)
O.mini(name, tag, base_from=str(base_world))
