"""Research harness (not part of the package, not tested): descriptor agreement of some models' full
sources, per task, as the world's report measures it (`measure_on_grids` + `descriptor_cosines`).

DIR is a built world or a scratch world of `one_model_world.py` (its tangent sources, meta kind
"tangent", are read back as LinearizedEncoders; a built world's through `load_world_model`).
Usage: python research/agreement.py DIR vit-a vit-b [...]
Prints one JSON line: per task the same-task cross-model and cross-task within-model cosines, and means.
"""
import sys, json
from pathlib import Path
import torch
torch.set_num_threads(1)
from platonic.world.image import data as D
from platonic.world.backend import load_world_model
from platonic.world.common.weights import load_weights
from platonic.finetuning import LinearizedEncoder
from platonic.experiments.setups import world_data
from platonic.experiments.engine import TaskSpec, EvalSet, measure_on_grids
from platonic.experiments.engine import descriptor_cosines

root, names = Path(sys.argv[1]), sys.argv[2:]
wdata = world_data(root)
models = {m: load_world_model(m, root=root) for m in names}
tasks = {}
for t in D.TASK_NAMES:
    d, prompts = wdata[t], tuple(D.TASKS[t].prompts)
    tasks[t] = TaskSpec(t, prompts, d.probes, EvalSet(t, d.test.images, d.test.labels, prompts), EvalSet(f"{t}/val", d.val.images, d.val.labels, prompts))


def load(m, t):
    delta, meta = load_weights(root / "models" / m / "ft" / f"{t}.full.safetensors")
    if meta.get("kind") == "tangent":
        return LinearizedEncoder(models[m], delta)
    return load_world_model(f"{m}/{t}", root=root)


_, on_grid = measure_on_grids(models, tasks, load, progress=False)
cos = descriptor_cosines(names, list(tasks), on_grid)["cosine"]
mean = lambda k: round(sum(c[k] for c in cos.values()) / len(cos), 3)
print(json.dumps({"world": str(root), "models": names, "same_task": mean("cross_model"), "cross_task": mean("cross_task"),
                  "per_task": {t: [round(c["cross_model"], 3), round(c["cross_task"], 3)] for t, c in cos.items()}}), flush=True)
