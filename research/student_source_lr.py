"""Research harness (not part of the package, not tested): the built students' full sources at another learning rate,
screened on the subsample metrics of research/trunk_student_screen.py (gain, recovery, locality) beside the built
sources (issue 33: scratch-resnet-b's locality 0.37 at lr 2.5e-4).

Usage: python research/student_source_lr.py NAME LR   (e.g. scratch-resnet-b 1.5e-4). Env: SCREEN_THREADS (1).
"""
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("SCREEN_THREADS", "1")
from trunk_student_screen import SETS, embed_sets, subsample, summarise  # noqa: E402

from platonic.world.common.weights import load_weights  # noqa: E402
from platonic.world.image.data import TASK_NAMES  # noqa: E402
from platonic.world.image.trunkworld.backend import load_trunk_world_model  # noqa: E402
from platonic.world.image.trunkworld.build import model_spec, read_data, replay_activations  # noqa: E402
from platonic.world.image.trunkworld.recipe import STUDENT_PROFILES, trunk_world_dir  # noqa: E402
from platonic.world.image.trunkworld.sources import train_source  # noqa: E402

if __name__ == "__main__":
    name, lr = sys.argv[1], float(sys.argv[2])
    world = trunk_world_dir("full", 0)
    data = read_data(world)
    sub = subsample(data)
    base = load_trunk_world_model(name, root=world)
    E = {name: embed_sets(lambda x: base.encode_probes(x).z, sub)}
    P = {name: {s: F.normalize(base.encode_texts(list(data[s].task.prompts)), dim=-1).double() for s in SETS}}
    S = {(name, "built"): {}, (name, f"lr{lr:g}"): {}}
    acts, _ = load_weights(world / "activations" / f"{name}.safetensors")
    recipe = replace(STUDENT_PROFILES["full"].sources_of(name)["full"], lr=lr)
    spec, scale = model_spec(name, 0), base.model.logit_scale.detach().exp().item()
    t0 = time.time()
    for j, task in enumerate(TASK_NAMES):
        built = load_trunk_world_model(f"{name}/{task}", root=world)
        S[(name, "built")][task] = embed_sets(lambda x: built.encode_probes(x).z, sub)
        seed = spec.seed * 100 + j * 2  # the build's seed of a full source
        prompts = F.normalize(base.encode_texts(list(data[task].task.prompts)), dim=-1)
        state = train_source(base.model.visual, "full", acts[task], data[task].train.labels, prompts, scale,
                             replay_activations(acts, task, recipe.replay_per_task, seed), recipe, seed)
        tuned = base.copy_for_new_weights()
        missing, unexpected = tuned.model.load_state_dict(state, strict=False)  # the part above the cut only
        assert not unexpected, unexpected
        tuned.invalidate_fingerprint()
        S[(name, f"lr{lr:g}")][task] = embed_sets(lambda x: tuned.encode_probes(x).z, sub)
    print({"sources_s": round(time.time() - t0)}, flush=True)
    summarise(E, P, S, sub)
