"""Research harness (not part of the package, not tested): audio source fine-tune settings on a few cells.

Loads the cached old full audio world (its bases and data), fine-tunes (model, task) cells with candidate
settings (the world's job_finetune recipe, config overridden), and prints test accuracy zero-shot / fine-tuned /
oracle (own descriptor, alpha 1) and the cell's recovery, with the seconds of the fine-tune.
Usage: python research/audio_cells.py WORLD "cnn:pitch,wav:digits" full '{"steps":120,"lr":2e-3}'
"""
import json, sys, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from platonic.world.audio import build as B
from platonic.world.audio.zoo import SPECS, model_from_state
from platonic.world.audio.tasks import TASK_NAMES
from platonic.world.common.jobs import set_determinism
from platonic.finetuning import finetune
from platonic.experiments.setups import audio_world_parts
from platonic.experiments.engine import ExperimentSetup
from platonic.experiments.engine import FeatureStore
from platonic.measurement import measure

world, cells, kind, over = Path(sys.argv[1]), sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
replay_per_task = over.pop("replay_per_task", 32)
pairs = [c.split(":") for c in cells.split(",")]
parts = audio_world_parts(world, models=sorted({m for m, _ in pairs}))
data = parts.data
for m, t in pairs:
    set_determinism(1)
    spec = SPECS[m]
    base = parts.models[m]
    k = B.KINDS.index(kind)
    seed = B.model_seed(spec, 0)
    cfg = B.PROFILES["full"].sources[kind].model_copy(update={**over, "seed": seed * 100 + TASK_NAMES.index(t) * 2 + k})
    replay = B.replay_pool(data, t, replay_per_task, seed)
    train = data[t].train
    t0, c0 = time.perf_counter(), time.process_time()
    tuned, losses = finetune(base, train.clips, train.labels, data[t].task.prompts, cfg, progress=False, replay_inputs=replay)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    task = parts.tasks[t]
    store = FeatureStore(ExperimentSetup("cells", {m: base}, {t: task}, {}, {}))
    zs = store.accuracy(m, task.test)
    from platonic.metrics import top1
    z = store.cache.probes(tuned, task.test.inputs, progress=False).z.double()
    ft = top1(z, store.prompt_embeddings(m, task.test), task.test.labels)
    d = measure(base, tuned, task.probes, task.prompts, t, cache=store.cache, progress=False)
    store2 = FeatureStore(ExperimentSetup("cells", {m: base}, {t: task}, {}, {(m, t): d}), cache=store.cache)
    store2.operator(m, (m, t), d)
    orc = store2.accuracy(m, task.test, [((m, t), 1.0)], alpha=1.0)
    rec = (orc - zs) / (ft - zs) if ft != zs else float("nan")
    print(json.dumps(dict(model=m, task=t, kind=kind, **over, rp=replay_per_task, zs=round(100 * zs, 1), ft=round(100 * ft, 1),
                          oracle=round(100 * orc, 1), rec=round(rec, 2), secs=round(secs, 1), cpu=round(cpu, 1))), flush=True)
