"""Research harness (not part of the package, not tested): how much of a fine-tune a last-layer operator
can imitate at all, against how much the oracle recovers from the paper's 30 probes per class.

For each (model, task) of a built or scratch world's full sources, through the library's own measure and
fast path (so every edit site, head sites included, is solved as the report solves it):
- oracle: the model's own descriptor on the task's probes (30 per class), solved and folded at alpha 1
  (the report's oracle);
- ceiling: the same closed form with every train image of the task as a probe (400 per class in the
  full profile): the least-squares imitation of the fine-tune by a last-layer edit, free of the probes'
  sampling; what a larger probe set could at best add;
- each on the test split and on the train split (where the probes come from), beside zero-shot and the
  fine-tune itself.
Recovery = sum over tasks of (accuracy - zero-shot) / sum of (fine-tuned - zero-shot), as in the report.

Usage: python research/imitation_ceiling.py DIR vit-a [mixer ...]
Prints per task one line and per model one JSON line (recoveries on test and on train). About 2-4 min per
model on one core.
"""
import sys, json
from pathlib import Path
import torch
torch.set_num_threads(1)
from platonic.world.image import data as D
from platonic.world.backend import load_world_model
from platonic.measurement import EmbeddingCache, measure
from platonic.metrics import top1
from platonic.experiments.setups import world_data
from platonic.experiments.engine import TaskSpec, EvalSet, ExperimentSetup
from platonic.experiments.engine import FeatureStore

root, names = Path(sys.argv[1]), sys.argv[2:]
wdata = world_data(root)


def specs(all_train: bool) -> dict:
    out = {}
    for t in D.TASK_NAMES:
        d, prompts = wdata[t], tuple(D.TASKS[t].prompts)
        out[t] = TaskSpec(t, prompts, d.train.images if all_train else d.probes, EvalSet(t, d.test.images, d.test.labels, prompts))
    return out


grids = {"oracle": specs(False), "ceiling": specs(True)}
splits = {"test": {t: s.test for t, s in grids["oracle"].items()},
          "train": {t: EvalSet(f"{t}/train", wdata[t].train.images, wdata[t].train.labels, s.prompts) for t, s in grids["oracle"].items()}}
for m in names:
    models = {m: load_world_model(m, root=root)}
    cache = EmbeddingCache()
    descriptors = {kind: {} for kind in grids}
    acc = {split: {t: {} for t in D.TASK_NAMES} for split in splits}
    base = FeatureStore(ExperimentSetup("w", models, grids["oracle"], {}, {}), cache=cache)
    for t in D.TASK_NAMES:
        ft = load_world_model(f"{m}/{t}", root=root)
        for kind, tasks in grids.items():
            descriptors[kind][(m, t)] = measure(models[m], ft, tasks[t].probes, tasks[t].prompts, t, cache=cache, progress=False)
        for split, sets in splits.items():
            e = sets[t]
            z = cache.probes(ft, e.inputs, progress=False).z.double()
            acc[split][t]["finetuned"] = top1(z, base.prompt_embeddings(m, e), e.labels)
            acc[split][t]["zero_shot"] = base.accuracy(m, e)
        del ft
    for kind, tasks in grids.items():
        store = FeatureStore(ExperimentSetup("w", models, tasks, {}, descriptors[kind]), cache=cache)
        for t in D.TASK_NAMES:
            store.operator(m, (m, t), descriptors[kind][(m, t)])
            for split, sets in splits.items():
                acc[split][t][kind] = store.accuracy(m, sets[t], [((m, t), 1.0)], alpha=1.0)
        store.drop_deltas(m)
    for t in D.TASK_NAMES:
        print(m, t, {split: {k: round(100 * v, 1) for k, v in acc[split][t].items()} for split in splits}, flush=True)

    def recovery(split, kind):
        rows = acc[split].values()
        return round(sum(r[kind] - r["zero_shot"] for r in rows) / sum(r["finetuned"] - r["zero_shot"] for r in rows), 3)

    mean = lambda split, k: round(100 * sum(r[k] for r in acc[split].values()) / len(D.TASK_NAMES), 1)
    print(json.dumps({"model": m, **{f"{split}_{k}": mean(split, k) for split in splits for k in ("zero_shot", "finetuned", "oracle", "ceiling")},
                      **{f"recovery_{kind}_{split}": recovery(split, kind) for kind in grids for split in splits}}), flush=True)
