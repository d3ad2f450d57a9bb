"""Research harness (not part of the package, not tested): a one-model scratch world.

Pre-trains a variant (pretrain_levers.run), fine-tunes its eight full sources with the world's exact
source recipe, then runs the world diagnostics on it (recovery, locality, linear probe, PR).
Usage: python research/one_model_world.py "mini('vit-a', 'd128', spec_over=dict(embed_dim=128), porth=3.0, orth=10.0)"
ft_over= updates every source FinetuneConfig, e.g. ft_over=dict(logit_scale=100.0, steps=None, epochs=1.5).
About 7 min (mixer) to 12 min (vit-a at d = 128) on one core; writes $PLATONIC_RESEARCH_OUT/w-TAG (default /tmp/platonic-research); base_from= copies a built world's
pre-trained weights instead of pre-training (5-8 min), task_over= sets a per-task FinetuneConfig update.
kind='tangent' fine-tunes the sources in the tangent space (FinetuneConfig mode "linear"), e.g.
"mini('vit-a', 'tan', kind='tangent', base_from='<built world>', ft_over=dict(logit_scale=30.0, lr=3e-3))".
"""
import sys, json, time, dataclasses, os, torch
from pathlib import Path
torch.set_num_threads(1)
sys.path.insert(0, str(Path(__file__).parent))
import pretrain_levers as scr
from platonic.world.image import build as B, zoo as Z, train as TR, data as D
from platonic.world.common.weights import load_weights, save_weights
from platonic.world.image.zoo import model_from_state, spec_to_json
from platonic.finetuning import finetune
from platonic.experiments.setups import world_data as _world_data
from platonic.experiments.engine import TaskSpec, EvalSet, ExperimentSetup, measure_on_grids
from platonic.experiments.engine import FeatureStore
from platonic.experiments.checks import diagnose
from platonic.world.backend import load_world_model
SRC = scr.W
def mini(name, tag, spec_over={}, cfg_over={}, ft_over={}, task_over={}, kind='full', base_from=None, **kw):
    """task_over: {task: FinetuneConfig updates} (a per-task source budget); kind: which source kind to
    fine-tune (stored under the .full name so the loader reads it), or "tangent": the full sources' recipe
    in `platonic.finetune`'s mode "linear" (the tower's first-order Taylor expansion; its dtheta is stored
    and read back as a LinearizedEncoder); base_from: a world directory whose built base weights to copy
    in instead of pre-training."""
    W2 = Path(os.environ.get('PLATONIC_RESEARCH_OUT', '/tmp/platonic-research')) / f'w-{tag}'; (W2/'models'/name/'ft').mkdir(parents=True, exist_ok=True)
    for f in ('data.safetensors','captions.safetensors'):
        if not (W2/f).exists(): os.symlink(SRC/f, W2/f)
    t0=time.time()
    spec=dataclasses.replace(Z.SPECS[name], **spec_over)
    Z.SPECS[name] = spec   # the loaders below read the patched spec (same dict object everywhere)
    if base_from and not (W2/'models'/name/'base.safetensors').exists():
        import shutil; shutil.copy(Path(base_from)/'models'/name/'base.safetensors', W2/'models'/name/'base.safetensors')
    if not (W2/'models'/name/'base.safetensors').exists():
        mod, res = scr.run(name, spec_over, cfg_over, tag=tag, **kw)
        save_weights(W2/'models'/name/'base.safetensors', mod.state_dict(), {"spec": spec_to_json(spec)})
    t1=time.time()
    data = scr.data
    prof = B.PROFILES['full']
    state,_ = load_weights(W2/'models'/name/'base.safetensors')
    model = model_from_state(Z.SPECS[name], state, f"world:{name}")
    tangent = kind == 'tangent'
    cfg0 = prof.sources['full' if tangent else kind].model_copy(update={**ft_over, **({'mode': 'linear'} if tangent else {})})
    for i,t in enumerate(D.TASK_NAMES):
        out = W2/'models'/name/'ft'/f'{t}.full.safetensors'
        if out.exists(): continue
        replay = B.replay_pool(data, t, prof.replay_per_task, B.model_seed(spec,0))
        cfg = cfg0.model_copy(update={**task_over.get(t, {}), "seed": B.model_seed(spec,0)*100 + i*2 + (kind == 'lora')})
        tuned,_ = finetune(model, data[t].train.images, data[t].train.labels, data[t].task.prompts, cfg, progress=False, replay_inputs=replay if cfg.replay else None)
        save_weights(out, tuned.delta if tangent else tuned.tower.state_dict(), {"kind": "tangent", "weights": B.TANGENT_WEIGHTS} if tangent else {"kind": "full"})
    t2=time.time()
    wdata = _world_data(W2)
    models = {name: load_world_model(name, root=W2)}
    tasks = {}
    for tn in D.TASK_NAMES:
        d, prompts = wdata[tn], tuple(D.TASKS[tn].prompts)
        tasks[tn] = TaskSpec(tn, prompts, d.probes, EvalSet(tn, d.test.images, d.test.labels, prompts), EvalSet(f"{tn}/val", d.val.images, d.val.labels, prompts))
    controls = {c: EvalSet(c, wdata[c].test.images, wdata[c].test.labels, tuple(D.CONTROLS[c].prompts)) for c in D.CONTROL_NAMES}
    base = FeatureStore(ExperimentSetup("w", models, tasks, controls, {}))
    ftacc = {}; ctrl_after = {}
    def load(m, t):
        if tangent:
            from platonic.finetuning import LinearizedEncoder
            ft = LinearizedEncoder(load_world_model(m, root=W2), load_weights(W2/'models'/m/'ft'/f'{t}.full.safetensors')[0])
        else:
            ft = load_world_model(f"{m}/{t}", root=W2)
        z = base.cache.probes(ft, tasks[t].test.inputs, progress=False).z.double()
        from platonic.metrics import top1
        ftacc[t] = top1(z, base.prompt_embeddings(m, tasks[t].test), tasks[t].test.labels)
        ctrl_after[t] = {c: top1(base.cache.probes(ft, e.inputs, progress=False).z.double(), base.prompt_embeddings(m, e), e.labels) for c, e in controls.items()}
        return ft
    desc, _ = measure_on_grids(models, tasks, load, progress=False)
    store = FeatureStore(ExperimentSetup("w", models, tasks, controls, desc), cache=base.cache)
    train = {t: EvalSet(f"{t}/train", wdata[t].train.images, wdata[t].train.labels, tasks[t].prompts) for t in D.TASK_NAMES}
    dg = diagnose(store, train, desc)[name]
    zc = {c: store.accuracy(name, e) for c, e in controls.items()}
    rows = dg['tasks']
    mean = lambda k: round(sum(r[k] for r in rows.values())/8, 3)
    ft_mean = sum(ftacc.values())/8
    zs_mean = mean('zero_shot'); 
    # recovery as the report computes it: sum of the oracle's gains over sum of the fine-tunes' gains
    rec = sum(r['oracle_alpha1']-r['zero_shot'] for r in rows.values()) / max(1e-9, sum(ftacc[t]-r['zero_shot'] for t, r in rows.items()))
    # damage[t][s]: change of task s's accuracy (points) under task t's oracle operator at alpha 1
    damage = {t: {s: round(100*(store.accuracy(name, tasks[s].test, [((name, t), 1.0)], alpha=1.0) - rows[s]['zero_shot']), 1)
                  for s in D.TASK_NAMES} for t in D.TASK_NAMES}
    summ = dict(tag=tag, model=name, pr_pooled=round(dg['participation_ratio'],2), zs=round(100*zs_mean,1), ft=round(100*ft_mean,1),
                probe=round(100*mean('linear_probe'),1), bestmap=round(100*mean('best_linear_map'),1),
                oracle05=round(100*mean('oracle_alpha05'),1), oracle1=round(100*mean('oracle_alpha1'),1),
                recovery=round(rec,3), own=round(100*mean('own_gain'),1), others=round(100*mean('others_change'),1),
                ctrl_oracle=round(100*mean('controls_change'),1), motion=mean('motion_ratio'),
                ft_minus_probe=[round(100*(ftacc[t]-r['linear_probe']),1) for t,r in rows.items()], ft_minus_probe_min=round(100*min(ftacc[t]-r['linear_probe'] for t,r in rows.items()),1),
                ctrl_ft_change=round(100*sum(ctrl_after[t][c]-zc[c] for t in ctrl_after for c in zc)/(8*len(zc)),1),
                per_task={t: dict(zs=round(100*r['zero_shot'],1), ft=round(100*ftacc[t],1), probe=round(100*r['linear_probe'],1), or1=round(100*r['oracle_alpha1'],1), others=round(100*r['others_change'],1), own=round(100*r['own_gain'],1), ctrl=round(100*r['controls_change'],1)) for t,r in rows.items()},
                damage=damage,
                secs=dict(pre=round(t1-t0), ft=round(t2-t1), diag=round(time.time()-t2)))
    print(json.dumps(summ), flush=True)
if __name__=='__main__':
    exec(sys.argv[1])
