"""Research harness (not part of the package, not tested): re-pre-train one zoo model with an extra
  loss term on the cached world data and print its pooled PR, prompt overlap and zero-shot.

It monkeypatches platonic.world.image.train (the sampler, the loss, build_module) so the built world and its
recipe hash are untouched. Used for the tables of docs/world.md ("Spreading the embeddings ...").
Usage: python research/pretrain_levers.py "run('mixer', tag='x', porth=3.0, orth=10.0)"
Needs the built full world of this checkout (make demo, or platonic world build).
"""
import os, sys, json, time, dataclasses, torch, torch.nn.functional as F
from pathlib import Path
torch.set_num_threads(1)
from platonic.world.image import build as B, zoo as Z, train as TR, data as D
# the built full world of this checkout's recipe (build it first), or PLATONIC_RESEARCH_WORLD=DIR
W = Path(os.environ['PLATONIC_RESEARCH_WORLD']) if os.environ.get('PLATONIC_RESEARCH_WORLD') else B.world_dir('full')
data, vocab, emb = B.load_world_inputs(W)
def pr(X):
    X=X.double(); X=X-X.mean(0); e=torch.linalg.eigvalsh(X.T@X/len(X)).clamp_min(0); return float(e.sum()**2/(e**2).sum())
def embed(tower, images, size):
    with torch.no_grad():
        tower.eval(); return torch.cat([tower(Z.normalise_pixels(images[s:s+512], size)) for s in range(0, len(images), 512)])
ORIG_LOSS = TR.contrastive_loss
ORIG_SAMPLE = TR.CaptionSampler.sample
STATE = {}
def sample(self, batch):
    g = self.gen
    st = g.get_state()
    which = torch.multinomial(self.weights, batch, replacement=True, generator=g)
    g.set_state(st)
    imgs, caps, set_ids = ORIG_SAMPLE(self, batch)
    STATE['sets'] = set_ids
    STATE['name_ids'] = self.name_ids
    return imgs, caps, set_ids
TR.CaptionSampler.sample = sample
def orth_penalty(z, sets):
    z = F.normalize(z, dim=-1)
    Ms = [z[sets==k].T @ z[sets==k] / max(1,(sets==k).sum()) for k in sets.unique()]
    Ms = [M / M.norm() for M in Ms]
    tot = 0.0; n = 0
    for i in range(len(Ms)):
        for j in range(i+1, len(Ms)):
            tot = tot + (Ms[i]*Ms[j]).sum(); n += 1
    return tot / max(1, n)
ORIG_BUILD = TR.build_module
def build_module(spec, seed):
    m = ORIG_BUILD(spec, seed); STATE['module'] = m; return m
TR.build_module = build_module
def prompt_orth_penalty(centre=True):
    mod = STATE['module']; Cs = []
    for ids in STATE['name_ids']:
        E = F.normalize(mod.text(emb[ids.flatten()]), dim=-1)
        if centre: E = E - E.mean(0)
        C = E.T @ E; Cs.append(C / C.norm())
    tot = 0.0; n = 0
    for i in range(len(Cs)):
        for j in range(i+1, len(Cs)):
            tot = tot + (Cs[i]*Cs[j]).sum(); n += 1
    return tot / n
def patch(unif=0.0, cov=0.0, tunif=0.0, orth=0.0, torth=0.0, porth=0.0, pcentre=True):
    def loss(zi, zt, caps, logit, kind):
        l = ORIG_LOSS(zi, zt, caps, logit, kind)
        if orth: l = l + orth * orth_penalty(zi, STATE['sets'])
        if porth: l = l + porth * prompt_orth_penalty(pcentre)
        if torth: l = l + torth * orth_penalty(zt, STATE['sets'])
        if unif:
            z = F.normalize(zi, dim=-1); sq = torch.cdist(z, z).pow(2)
            n=len(z); mask=~torch.eye(n, dtype=torch.bool)
            l = l + unif * torch.log(torch.exp(-2*sq[mask]).mean())
        if tunif:
            z = F.normalize(zt, dim=-1); sq = torch.cdist(z, z).pow(2)
            n=len(z); mask=~torch.eye(n, dtype=torch.bool)
            l = l + tunif * torch.log(torch.exp(-2*sq[mask]).mean())
        if cov:
            z = F.normalize(zi, dim=-1); z = z - z.mean(0); C = z.T @ z / (len(z)-1)
            C = C / C.diagonal().sum()   # trace-normalised covariance
            l = l + cov * len(C) * (C**2).sum()   # = d * sum lambda^2 / (sum lambda)^2 = d / PR
        return l
    TR.contrastive_loss = loss
def run(name, spec_over={}, cfg_over={}, tag='', orth=0.0, porth=0.0, **kw):
    # the two orthogonality terms are now the recipe's own (ModelSpec); the rest stay patched here
    if orth or porth:
        spec_over = {**spec_over, "image_orthogonality": orth, "prompt_orthogonality": porth}
    patch(**kw)
    spec=dataclasses.replace(Z.SPECS[name], **spec_over)
    cfg=dataclasses.replace(B.PROFILES['full'].pretrain, **cfg_over)
    t0=time.time()
    mod, st = TR.pretrain(spec, data, vocab, emb, cfg, B.model_seed(spec,0))
    idx={c:i for i,c in enumerate(vocab)}
    P=[];zs={};within=[]
    def zero_shot(name):  # test top-1 (%) of a task or control against its prompts
        G=F.normalize(mod.text(emb[[idx[p] for p in data[name].task.prompts]]),dim=-1)
        zt=F.normalize(embed(mod.image, data[name].test.images, spec.input_size),dim=-1)
        return round(100*float(((zt@G.T).argmax(1)==data[name].test.labels).float().mean()),1)
    with torch.no_grad():
        for t in D.TASK_NAMES:
            z=F.normalize(embed(mod.image, data[t].probes, spec.input_size),dim=-1); P.append(z); within.append(pr(z))
            zs[t]=zero_shot(t)
        czs={c: zero_shot(c) for c in D.CONTROL_NAMES}
    Ms=[p.double().T@p.double()/len(p) for p in P]; Ms=[M/M.norm() for M in Ms]
    ov=sum(float((Ms[i]*Ms[j]).sum()) for i in range(8) for j in range(i+1,8))/28
    with torch.no_grad(): pov = float(prompt_orth_penalty(True))
    res=dict(tag=tag, model=name, overlap=round(ov,3), prompt_overlap=round(pov,3), pr=round(pr(torch.cat(P)),2), pr_within=round(sum(within)/8,2), zs_mean=round(sum(zs.values())/8,1), zs=zs, controls=czs,
             loss=round(st['final_loss'],3), scale=round(st['logit_scale'],1), secs=round(time.time()-t0))
    print(json.dumps(res), flush=True)
    return mod, res
if __name__=='__main__':
    exec(sys.argv[1])
