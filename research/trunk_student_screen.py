"""Research harness (not part of the package, not tested): from-scratch towers for the world on real trunks
(issue 33, item 1), screened on the built trunk world before any build change.

Students are real open_clip models (`OpenClipWorldSpec` tower "vit": open_clip's VisionTransformer; "resnet":
open_clip's ModifiedResNet; "timm" with a config folder: timm's hybrid ViT) on the frozen MiniLM with a linear text projection, drawn from random weights and
pre-trained on every train image of the built trunk world (32 px canonical, no resize) with

    L = CLIP(z_img, z_txt) + 10 set_overlap + 3 prompt_overlap + DISTILL (1 - cos(P z_img, z_teacher))

on captions that name the class NAME_RATE of the time (hint 40 %), z_teacher the teacher trunk model's
image embedding (read from the build's cached activations), P a d_s x d_t map thrown away after. Whole
tower, text projection and logit scale train (AdamW lr LR, warm-up 5 % + cosine, gradients clipped at 1).

Sources per task (the trunk world's source recipe: 200 steps of 64, AdamW wd 0.1, warm-up 10 % + cosine,
the model's own logit scale, replay 3 over 64 train images of every other task):
- "last": the ViT's last residual block, ln_post and proj (ModifiedResNet: layer4 and the attention pool) on
  cached activations below them, lr SOURCE_LR;
- "whole": every tower parameter on the images, lr WHOLE_LR.

Measured on the world's test splits (subsampled to 500 a set) and probes (30 a class), as research/trunk_screen.py
defines them: zero-shot, linear probe, PR, fine-tune gain, oracle (own descriptor, paper's solve, alpha 1),
recovery, locality; then transfer at alpha 0.5 between the students and the built trunk models' full sources.

Usage: python research/trunk_student_screen.py ARCH [ARCH ...]  (vit, vit-p4, vit-wide, resnet, vit-stem: timm's
hybrid ViT, a convolutional stem under 2 x 2 patches, as `recipe.STUDENTS["scratch-vit"]` builds it; STEM_PATCH,
STEM_CFG (extra timm model_args) change it). Env: STUDENT_DISTILL (5),
STUDENT_STEPS (3000), STUDENT_NAME_RATE (0.03), STUDENT_LR (2e-3), SOURCE_LR (1e-3), WHOLE_LR (1e-3),
STUDENT_KINDS (last,whole), STUDENT_TEACHER (lite0-linear), SCREEN_THREADS (2), STUDENT_TAG (''),
STUDENT_TARGET (embedding; pooled: distil the teacher trunk's pooled features, centred, instead of its embedding),
STUDENT_SEED (0: added to the student's weight and batch-order seeds).
OUT: $PLATONIC_RESEARCH_OUT (/tmp/platonic-research)/trunk-students.
"""
import copy
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from platonic import solve
from platonic.world.common.losses import contrastive_loss, prompt_overlap, set_overlap
from platonic.world.image.data import CONTROL_NAMES, TASK_NAMES
from platonic.world.image.openclip_models import OpenClipWorldSpec, build_openclip_model
from platonic.world.image.trunkworld.build import read_captions, read_data
from platonic.world.image.trunkworld.pretrain import MAX_LOG_SCALE, CaptionDraw, schedule
from platonic.world.image.trunkworld.recipe import MODEL_NAMES, trunk_world_dir
from platonic.world.image.trunkworld.tower import Above, model_input
from platonic.world.common.weights import load_weights

sys.path.insert(0, str(Path(__file__).parent))
from trunk_screen import acc, edited, linear_probe, participation_ratio  # noqa: E402

torch.set_num_threads(int(os.environ.get("SCREEN_THREADS", "2")))
SETS = TASK_NAMES + CONTROL_NAMES
DISTILL = float(os.environ.get("STUDENT_DISTILL", "5"))
STEPS = int(os.environ.get("STUDENT_STEPS", "3000"))
NAME_RATE = float(os.environ.get("STUDENT_NAME_RATE", "0.03"))
LR = float(os.environ.get("STUDENT_LR", "2e-3"))
SOURCE_LR = float(os.environ.get("SOURCE_LR", "1e-3"))
WHOLE_LR = float(os.environ.get("WHOLE_LR", "1e-3"))
KINDS = os.environ.get("STUDENT_KINDS", "last,whole").split(",")
TEACHER = os.environ.get("STUDENT_TEACHER", "lite0-linear")
TAG = os.environ.get("STUDENT_TAG", "")
SEED = int(os.environ.get("STUDENT_SEED", "0"))  # added to the student's weight seed (500) and batch-order seed (600)
AUG = int(os.environ.get("STUDENT_AUG", "0"))  # > 0: pre-training images shifted at random by up to AUG px (replicate pad)
VIT_CFG = json.loads(os.environ.get("VIT_CFG", "{}"))  # extra open_clip vision_cfg keys, e.g. {"pos_embed_type": "sin_cos_2d"}
TARGET = os.environ.get("STUDENT_TARGET", "embedding")  # or "pooled": the trunk's 1280-d pooled features, centred
N_TEST = 500
ARCHS = {
    # patch 8 on the 32 px canvas (16 tokens + class): a step of 128 took 0.26-0.33 s of one shared core here, patch 4 about 1 s
    "vit": dict(tower="vit", image_size=32, width=64, layers=4, patch_size=8, head_width=16, embed_dim=128),
    "vit-p4": dict(tower="vit", image_size=32, width=64, layers=4, patch_size=4, head_width=16, embed_dim=128),
    "vit-wide": dict(tower="vit", image_size=32, width=128, layers=4, patch_size=8, head_width=32, embed_dim=160),
    "resnet": dict(tower="resnet", image_size=32, width=32, layers=(1, 1, 1, 1), head_width=32, embed_dim=144),
    # timm's hybrid ViT (a ResNet-v2 stem: 7x7 conv stride 2, group norm, 3x3 max pool stride 2; then patch STEM_PATCH
    # on its 8 x 8 map), built by open_clip's TimmModel from a timm "local-dir:" config (architecture + model_args)
    "vit-stem": dict(tower="timm", image_size=32, timm_pool="avg", timm_proj="linear", embed_dim=128),
}
STEM_PATCH = int(os.environ.get("STEM_PATCH", "2"))
STEM_CFG = json.loads(os.environ.get("STEM_CFG", "{}"))  # extra timm model_args


def stem_dir() -> str:
    d = out_dir() / f"timm-vit-stem-p{STEM_PATCH}{TAG}"
    d.mkdir(parents=True, exist_ok=True)
    args = {"img_size": 32, "patch_size": STEM_PATCH, "embed_dim": 64, "depth": 4, "num_heads": 4, **STEM_CFG}
    (d / "config.json").write_text(json.dumps({"architecture": "vit_tiny_r_s16_p8_224", "num_classes": 0, "model_args": args,
                                               "pretrained_cfg": {"input_size": [3, 32, 32], "num_classes": 0}}))
    return f"local-dir:{d}"
WORLD_MEAN, WORLD_STD = (0.5,) * 3, (0.25,) * 3


def out_dir() -> Path:
    p = Path(os.environ.get("PLATONIC_RESEARCH_OUT", "/tmp/platonic-research")) / "trunk-students"
    p.mkdir(parents=True, exist_ok=True)
    return p


# -- the cut of a from-scratch tower ----------------------------------------------------------------

def below(visual, x):
    """(B, 3, S, S) model input -> what enters the last block: ViT tokens (B, L, w); ResNet layer3's map."""
    if hasattr(visual, "trunk"):  # timm ViT under open_clip's TimmModel
        tr = visual.trunk
        t = tr.norm_pre(tr.patch_drop(tr._pos_embed(tr.patch_embed(x))))
        for b in tr.blocks[:-1]:
            t = b(t)
        return t
    if hasattr(visual, "transformer"):
        t = visual._embeds(x)
        for r in visual.transformer.resblocks[:-1]:
            t = r(t)
        return t
    x = visual.stem(x)
    return visual.layer3(visual.layer2(visual.layer1(x)))


class Upper(torch.nn.Module):
    """The part of a from-scratch tower above `below` (a copy): ViT last block -> pool -> ln/proj; ResNet
    layer4 -> attention pool."""

    def __init__(self, visual):
        super().__init__()
        self.v = copy.deepcopy(visual)
        if hasattr(self.v, "trunk"):
            keep = {"trunk.blocks." + str(len(self.v.trunk.blocks) - 1), "trunk.norm", "trunk.fc_norm", "head"}
        elif hasattr(self.v, "transformer"):
            keep = {"transformer.resblocks." + str(len(self.v.transformer.resblocks) - 1), "ln_post", "proj"}
        else:
            keep = {"layer4", "attnpool"}
        for n, p in self.v.named_parameters():
            p.requires_grad_(any(n == k or n.startswith(k + ".") for k in keep))

    def forward(self, a):
        v = self.v
        if hasattr(v, "trunk"):
            return v.head(v.trunk.forward_head(v.trunk.norm(v.trunk.blocks[-1](a))))
        if hasattr(v, "transformer"):
            t = v.transformer.resblocks[-1](a)
            pooled, _ = v._pool(t)
            return pooled @ v.proj if v.proj is not None else pooled
        return v.attnpool(v.layer4(a))


if VIT_CFG:
    _vision_cfg = OpenClipWorldSpec.vision_cfg
    OpenClipWorldSpec.vision_cfg = lambda self: {**_vision_cfg(self), **(VIT_CFG if self.tower == "vit" else {})}


def shifted(x, g):
    """(B, 3, s, s) uint8 -> the same images each shifted by up to AUG px in x and y (edges replicated)."""
    b, _, s, _ = x.shape
    padded = F.pad(x.float(), (AUG,) * 4, mode="replicate")
    dy, dx = torch.randint(0, 2 * AUG + 1, (2, b, 1, 1), generator=g)
    ar = torch.arange(s)
    rows, cols = (dy + ar.view(1, s, 1)).expand(b, s, s), (dx + ar.view(1, 1, s)).expand(b, s, s)
    out = padded[torch.arange(b).view(b, 1, 1), :, rows, cols]  # (b, s, s, 3)
    return out.permute(0, 3, 1, 2).to(x.dtype)


def spec_of(arch: str) -> OpenClipWorldSpec:
    if arch == "vit-stem":  # the package's config folder unless STEM_PATCH / STEM_CFG change it
        timm_model = "hybrid-vit-32" if (STEM_PATCH, STEM_CFG) == (2, {}) else stem_dir()
        return OpenClipWorldSpec(f"scratch-{arch}", mean=WORLD_MEAN, std=WORLD_STD, seed=500 + SEED,
                                 timm_model=timm_model, **ARCHS[arch])
    return OpenClipWorldSpec(f"scratch-{arch}", mean=WORLD_MEAN, std=WORLD_STD, seed=500 + SEED, **ARCHS[arch])


def embed(visual, images, spec, batch=512):
    with torch.no_grad():
        return torch.cat([visual(model_input(images[i:i + batch], spec)) for i in range(0, len(images), batch)])


# -- pre-training ------------------------------------------------------------------------------------

class _Scale:
    def __init__(self, model):
        self.model = model

    @property
    def scale(self):
        return self.model.logit_scale.clamp(max=MAX_LOG_SCALE).exp()


def pretrain(model, spec, data, vocab, text, teacher_z, seed, batch=128):
    draw = CaptionDraw(SETS, vocab, [data[s].train.labels for s in SETS], NAME_RATE, 0.4, seed)
    d_t = teacher_z[0].shape[1]
    to_teacher = torch.nn.Linear(spec.embed_dim, d_t, bias=False)
    proj = model.text.proj
    params = [*model.visual.parameters(), *proj.parameters(), model.logit_scale]
    extra = list(to_teacher.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2] + extra, "weight_decay": 0.05},
                             {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}], lr=LR, betas=(0.9, 0.98))
    scale = _Scale(model)
    model.visual.train()
    images = [data[s].train.images for s in SETS]
    g_aug = torch.Generator().manual_seed(seed + 17)
    for step in range(STEPS):
        for g in opt.param_groups:
            g["lr"] = LR * schedule(step, STEPS, 0.05)
        drawn = draw(batch)
        x = torch.cat([images[k][idx] for k, idx, _ in drawn])
        if AUG:
            x = shifted(x, g_aug)
        caps = torch.cat([c for _, _, c in drawn])
        t = torch.cat([teacher_z[k][idx] for k, idx, _ in drawn])
        set_ids = torch.cat([torch.full((len(idx),), k) for k, idx, _ in drawn])
        zi, zt = model.visual(model_input(x, spec)), proj(text[caps])
        loss = (contrastive_loss(zi, zt, caps, scale, "clip") + 10 * set_overlap(zi, set_ids)
                + 3 * prompt_overlap(proj, text, draw.name_ids)
                + DISTILL * (1 - F.cosine_similarity(to_teacher(zi), t, dim=-1)).mean())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params + extra, 1.0)
        opt.step()
        if step % 500 == 0:
            print(json.dumps({"step": step, "loss": round(loss.item(), 4)}), flush=True)
    model.visual.eval()
    with torch.no_grad():
        model.logit_scale.clamp_(max=MAX_LOG_SCALE)
    return model


# -- sources -----------------------------------------------------------------------------------------

def train_source(model, spec, kind, task, data, prompts, seed, steps=200, batch=64, replay=3.0, per_task=64):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    scale = model.logit_scale.detach().exp().item()
    rep_imgs = torch.cat([data[t].train.images[torch.randperm(len(data[t].train), generator=g)[:per_task]]
                          for t in TASK_NAMES if t != task])
    if kind == "last":
        net = Upper(model.visual).eval()
        with torch.no_grad():
            x_tr = torch.cat([below(model.visual, model_input(data[task].train.images[i:i + 512], spec))
                              for i in range(0, len(data[task].train), 512)])
            rep = below(model.visual, model_input(rep_imgs, spec))
        run, lr = net, SOURCE_LR
    else:
        net = copy.deepcopy(model.visual).eval()
        x_tr, rep = data[task].train.images, rep_imgs
        run, lr = (lambda x: net(model_input(x, spec))), WHOLE_LR
    params = [p for p in net.parameters() if p.requires_grad]
    y_tr = data[task].train.labels
    with torch.no_grad():
        rep_target = F.normalize(run(rep), dim=-1)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.1)
    for step in range(steps):
        for grp in opt.param_groups:
            grp["lr"] = lr * schedule(step, steps, 0.1)
        i = torch.randint(0, len(x_tr), (batch,), generator=g)
        loss = F.cross_entropy(scale * F.normalize(run(x_tr[i]), dim=-1) @ prompts.T, y_tr[i])
        r = torch.randint(0, len(rep), (32,), generator=g)
        loss = loss + replay * (F.normalize(run(rep[r]), dim=-1) - rep_target[r]).pow(2).sum(1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if kind == "last":
        return net.v.eval()
    return net


# -- metrics: research/trunk_screen.py's (acc, edited, participation_ratio, linear_probe) ---------------

def subsample(data):
    g = torch.Generator().manual_seed(0)
    out = {}
    for s in SETS:
        te = torch.randperm(len(data[s].test), generator=g)[:N_TEST]
        out[s] = {"test": (data[s].test.images[te], data[s].test.labels[te])}
        if s in TASK_NAMES:
            out[s]["probes"] = data[s].train.images[data[s].probe_index]
    return out


def embed_sets(fn, sub):
    return {s: {k: F.normalize(fn(v[0] if k == "test" else v), dim=-1).double() for k, v in sub[s].items()} for s in SETS}


def summarise(E, P, S, sub):
    rows = {}
    for (name, kind), src in S.items():
        gains, own, other, ctrl = {}, {}, {}, {}
        for t in TASK_NAMES:
            y = sub[t]["test"][1]
            base_acc = acc(E[name][t]["test"], P[name][t], y)
            gains[t] = acc(src[t][t]["test"], P[name][t], y) - base_acc
            U = (src[t][t]["probes"] - E[name][t]["probes"]) @ P[name][t].T
            X = solve(E[name][t]["probes"], P[name][t], U)
            ch = {s: acc(edited(E[name][s]["test"], X, 1.0), P[name][s], sub[s]["test"][1])
                  - acc(E[name][s]["test"], P[name][s], sub[s]["test"][1]) for s in SETS}
            own[t], other[t] = ch[t], sum(ch[s] for s in TASK_NAMES if s != t) / 7
            ctrl[t] = sum(ch[c] for c in CONTROL_NAMES) / len(CONTROL_NAMES)
        rec = sum(own.values()) / max(1e-9, sum(gains.values()))
        loc = (sum(-min(0, other[t]) for t in TASK_NAMES) / 8) / max(1e-9, sum(own.values()) / 8)
        rows[(name, kind)] = dict(gain=sum(gains.values()) / 8, own=sum(own.values()) / 8,
                                  other=sum(other.values()) / 8, ctrl=sum(ctrl.values()) / 8, recovery=rec, locality=loc)
        print(json.dumps({"model": name, "kind": kind, **{k: round(v, 3) for k, v in rows[(name, kind)].items()},
                          "gains": {t: round(v, 1) for t, v in gains.items()},
                          "own": {t: round(v, 1) for t, v in own.items()}}), flush=True)
    return rows


def transfer(E, P, S, sub, pool, alpha=0.5):
    def desc(n, k, t):
        return (S[(n, k)][t][t]["probes"] - E[n][t]["probes"]) @ P[n][t].T
    for a, ka in pool:
        for b, kb in pool:
            if a == b:
                continue
            tr, orc, ctrl = 0.0, 0.0, 0.0
            for t in TASK_NAMES:
                F0, G, y = E[b][t]["probes"], P[b][t], sub[t]["test"][1]
                base = acc(E[b][t]["test"], G, y)
                Xt, Xo = solve(F0, G, desc(a, ka, t)), solve(F0, G, desc(b, kb, t))
                tr += acc(edited(E[b][t]["test"], Xt, alpha), G, y) - base
                orc += acc(edited(E[b][t]["test"], Xo, alpha), G, y) - base
                ctrl += sum(acc(edited(E[b][c]["test"], Xt, alpha), P[b][c], sub[c]["test"][1])
                            - acc(E[b][c]["test"], P[b][c], sub[c]["test"][1]) for c in CONTROL_NAMES) / len(CONTROL_NAMES)
            print(json.dumps({"source": f"{a}/{ka}", "target": f"{b}/{kb}", "alpha": alpha, "transfer": round(tr / 8, 2),
                              "oracle": round(orc / 8, 2), "retention": round(tr / max(1e-9, orc), 3),
                              "control": round(ctrl / 8, 2)}), flush=True)


def trunk_records(world, sub):
    """The built trunk models' base and full-source embeddings of the subsample (cached)."""
    from platonic.world.image.trunkworld.backend import load_trunk_world_model

    path = out_dir() / "trunk-models.pt"
    if path.exists():
        return torch.load(path, weights_only=False)
    E, P, S = {}, {}, {}
    for name in MODEL_NAMES:
        enc = load_trunk_world_model(name, root=world)
        E[name] = embed_sets(lambda x: enc.encode_probes(x).z, sub)
        P[name] = {s: F.normalize(enc.encode_texts(list(DATA[s].task.prompts)), dim=-1).double() for s in SETS}
        S[(name, "full")] = {}
        for t in TASK_NAMES:
            src = load_trunk_world_model(f"{name}/{t}", root=world)
            S[(name, "full")][t] = embed_sets(lambda x: src.encode_probes(x).z, sub)
        print(json.dumps({"embedded": name}), flush=True)
    torch.save((E, P, S), path)
    return E, P, S


if __name__ == "__main__":
    world = trunk_world_dir("full", 0)
    out = out_dir()
    DATA = read_data(world)
    vocab, text = read_captions(world)
    SUB = subsample(DATA)
    t_acts, _ = load_weights(world / "activations" / f"{TEACHER}.safetensors")
    import open_clip
    teacher = open_clip.create_model(f"local-dir:{world / 'models' / TEACHER}").eval()
    with torch.no_grad():
        up = Above(teacher.visual)
        head = up if TARGET == "embedding" else up.trunk_features
        teacher_z = [torch.cat([head(t_acts[s][i:i + 1024]) for i in range(0, len(t_acts[s]), 1024)]) for s in SETS]
        if TARGET == "pooled":  # the trunk's pooled features are post-ReLU6, all positive: centre them first
            centre = torch.cat(teacher_z).mean(0)
            teacher_z = [z - centre for z in teacher_z]
        teacher_z = [F.normalize(z, dim=-1) for z in teacher_z]
    del t_acts
    E, P, S = {}, {}, {}
    for arch in sys.argv[1:]:
        spec = spec_of(arch)
        name = f"student-{arch}{TAG}"
        t0 = time.time()
        model = build_openclip_model(spec)
        saved = out / f"{name}.pt"
        if saved.exists():
            model.load_state_dict(torch.load(saved))
        else:
            model = pretrain(model, spec, DATA, vocab, text, teacher_z, seed=600 + SEED)
            torch.save(model.state_dict(), saved)
        model.eval()
        with torch.no_grad():  # the cut is exact: Upper(below(x)) == visual(x)
            x = model_input(DATA["digits"].test.images[:8], spec)
            gap = (Upper(model.visual)(below(model.visual, x)) - model.visual(x)).abs().max().item()
        assert gap < 1e-5, gap
        t1 = time.time()
        with torch.no_grad():
            proj = model.text.proj
            index = {c: i for i, c in enumerate(vocab)}
            P[name] = {s: F.normalize(proj(text[[index[p] for p in DATA[s].task.prompts]]), dim=-1).double() for s in SETS}
        E[name] = embed_sets(lambda x: embed(model.visual, x, spec), SUB)
        zs = {s: acc(E[name][s]["test"], P[name][s], SUB[s]["test"][1]) for s in SETS}
        lp = {}
        for t in TASK_NAMES:
            ztr = F.normalize(embed(model.visual, DATA[t].train.images[:2000], spec), dim=-1).double()
            lp[t] = linear_probe(ztr, DATA[t].train.labels[:2000], E[name][t]["test"], SUB[t]["test"][1], len(P[name][t]))
        pr = participation_ratio(torch.cat([E[name][t]["probes"] for t in TASK_NAMES]))
        print(json.dumps({"model": name, "arch": ARCHS[arch], "distill": DISTILL, "target": TARGET, "steps": STEPS, "name_rate": NAME_RATE, "aug": AUG, "vit_cfg": VIT_CFG,
                          "zero_shot": round(sum(zs[t] for t in TASK_NAMES) / 8, 1), "probe": round(sum(lp.values()) / 8, 1),
                          "pr": round(pr, 1), "zs": {s: round(v, 1) for s, v in zs.items()},
                          "pretrain_s": round(t1 - t0)}), flush=True)
        for kind in KINDS:
            lr_tag = SOURCE_LR if kind == "last" else WHOLE_LR
            spath = out / f"{name}-{kind}-lr{lr_tag:g}.pt"
            if spath.exists():
                S[(name, kind)] = torch.load(spath, weights_only=False)
                continue
            t2 = time.time()
            S[(name, kind)] = {}
            for j, t in enumerate(TASK_NAMES):
                tower = train_source(model, spec, kind, t, DATA, P[name][t].float(), seed=700 + j)
                S[(name, kind)][t] = embed_sets(lambda x: embed(tower, x, spec), SUB)
            torch.save(S[(name, kind)], spath)
            print(json.dumps({"model": name, "kind": kind, "sources_s": round(time.time() - t2)}), flush=True)
    summarise(E, P, S, SUB)
    if os.environ.get("STUDENT_TRANSFER", "1") == "1":
        Et, Pt, St = trunk_records(world, SUB)
        E.update(Et)
        P.update(Pt)
        S.update(St)
        summarise(Et, Pt, St, SUB)
        pool = [(n, "full") for n in MODEL_NAMES] + [k for k in S if k[0].startswith("student")]
        transfer(E, P, S, SUB, pool)
