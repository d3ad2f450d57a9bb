"""Research harness (not part of the package, not tested): screen the world on real pretrained trunks (issue 33)
on cached features, before any rebuild.

Bases: the ImageNet-pretrained EfficientNet-Lite0/1/2 trunks (`platonic.world.image.trunks`), frozen, with a
trainable image head (linear, MLP, or an attention pool of open_clip's timm "abs_attn" form over the
final 2 x 2 feature map: `AttnPool`, model lite1-attn) and a trainable linear text head over the frozen MiniLM, pre-trained
LiT-style with the world's CLIP loss and orthogonality terms on captions that name the class only
`name_rate` of the time. Sources, per (model, task), with the world's replay term (rho 3 over 64 train
images of every other task):
- "head":  the image head only, on cached pooled features;
- "block": the trunk's last stage (`blocks[-1]`), its 1x1 head conv and batch norm (affine only, running
  statistics frozen) and the image head, on cached activations below the last stage.
The six built world models (from-scratch towers, `platonic world path`) and their full sources join the
cross-model table, on the same probes and the same test subsample.

Measured (all on the world's test splits, subsampled to at most 500 images a task; probes = the world's,
30 per class): zero-shot, the embedding's linear probe, participation ratio of pooled probe embeddings,
fine-tune gain, the oracle (own descriptor solved on the model itself, alpha 1): own gain, other tasks'
change, controls' change, recovery = sum oracle gains / sum fine-tune gains, locality = mean other-task
change / own gain; same-task vs cross-task descriptor cosine; transfer (alpha 0.5 and 1) from every other
model, retention = transfer gain / the target's own oracle gain at the same alpha, per (source, target).

Usage: python research/trunk_screen.py [WORLD_DIR]   (default: `platonic world path`); OUT in
$PLATONIC_RESEARCH_OUT (default /tmp/platonic-research)/trunk-screen. Each stage is cached there (features,
bases, source embeddings). Env: SCREEN_SIZE (input side, default 64), SCREEN_NAME_RATE (0.03),
SCREEN_MODELS (comma list of base names below), SCREEN_KINDS (head,block).
"""
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from platonic import solve
from platonic.experiments.setups import world_data
from platonic.world.common.jobs import read_captions
from platonic.world.common.losses import contrastive_loss, prompt_overlap, set_overlap
from platonic.world.image.data import CONTROL_NAMES, TASK_NAMES
from platonic.world.image.trunks import load_trunk, normalise
from platonic.world.image.trunkworld.pretrain import CaptionDraw  # the draws this screen made before it moved there

torch.set_num_threads(int(os.environ.get("SCREEN_THREADS", "2")))
SIZE = int(os.environ.get("SCREEN_SIZE", "64"))
NAME_RATE = float(os.environ.get("SCREEN_NAME_RATE", "0.03"))
N_TRAIN, N_TEST, N_REPLAY = 1000, 500, 64
SETS = TASK_NAMES + CONTROL_NAMES
# name -> (trunk, image head, d, seed)
BASES = {
    "lite0-linear": ("efficientnet-lite0", "linear", 256, 1),
    "lite1-mlp": ("efficientnet-lite1", "mlp", 384, 2),
    "lite2-linear": ("efficientnet-lite2", "linear", 192, 3),
    "lite1-attn": ("efficientnet-lite1", "attn", 384, 4),  # open_clip's timm_pool "abs_attn" form (AttnPool)
}
# built world models joining the cross-model table (and research/student_screen.py's students, "student-ARCH")
SCRATCH = tuple(os.environ.get("SCREEN_SCRATCH_MODELS", "vit-a,resnet,mixer").split(","))


# SCREEN_HARD=1: shapes and textures replaced by research/hard_tasks_screen.py's candidates (issue 33, item 4)
HARD = {"shapes": "small-lowc", "textures": "lowc-noise-rot"} if os.environ.get("SCREEN_HARD") == "1" else {}


def out_dir() -> Path:
    p = Path(os.environ.get("PLATONIC_RESEARCH_OUT", "/tmp/platonic-research")) / f"trunk-screen-{SIZE}{'-hard' if HARD else ''}"
    p.mkdir(parents=True, exist_ok=True)
    return p


def cached(path: Path, make):
    if path.exists():
        return torch.load(path, weights_only=False)
    t0 = time.time()
    obj = make()
    torch.save(obj, path)
    print(json.dumps({"made": path.name, "seconds": round(time.time() - t0, 1)}), flush=True)
    return obj


# -- data subsample ---------------------------------------------------------------------------------

def subsample(data) -> dict:
    """Per set: train / test index subsamples (seeded), with images and labels."""
    g = torch.Generator().manual_seed(0)
    out = {}
    for s in SETS:
        d = data[s]
        tr = torch.randperm(len(d.train), generator=g)[:N_TRAIN]
        te = torch.randperm(len(d.test), generator=g)[:N_TEST]
        out[s] = {"train": (d.train.images[tr], d.train.labels[tr]), "test": (d.test.images[te], d.test.labels[te]),
                  "probes": d.probes, "prompts": list(d.task.prompts)}
    for s, candidate in HARD.items():  # rendered anew: 1,000 train (probes: 30 a class of them, the world's draw), 500 test
        sys.path.insert(0, str(Path(__file__).parent))
        from hard_tasks_screen import CANDIDATES, split
        from platonic.data.probes import probe_indices

        k = len(out[s]["prompts"])
        train = split(s, CANDIDATES[s][candidate], N_TRAIN // k * k, 11)
        test = split(s, CANDIDATES[s][candidate], N_TEST // k * k, 12)
        out[s].update(train=train, test=test, probes=train[0][probe_indices(len(train[0]), k)])
    return out


# -- trunk features --------------------------------------------------------------------------------

class Tail(nn.Module):
    """The trunk above the cached activations: last stage, 1x1 head conv, batch norm + act, then the average
    pool (B, 1280), or with pool=False the feature map (B, 1280, h, w) an attention-pool head reads."""

    def __init__(self, trunk, pool: bool = True):
        super().__init__()
        self.block, self.conv_head, self.bn2 = trunk.blocks[-1], trunk.conv_head, trunk.bn2
        self.pool = pool

    def forward(self, a):
        m = self.bn2(self.conv_head(self.block(a)))
        return m.mean((2, 3)) if self.pool else m


@torch.inference_mode()
def with_maps(feats: dict, trunk_name: str) -> dict:
    """feats with each pooled (n, 1280) replaced by the feature map (n, 1280, h, w), computed from the cached
    activations below the last stage (what an attention-pool head reads)."""
    tail = Tail(load_trunk(trunk_name), pool=False).eval()
    tail.load_state_dict(feats["tail"])
    out = {"tail": feats["tail"]}
    for s, splits_ in feats.items():
        if s != "tail":
            out[s] = {k: (pre, torch.cat([tail(pre[i:i + 512]) for i in range(0, len(pre), 512)])) for k, (pre, _) in splits_.items()}
    return out


def trunk_features(trunk_name: str, sub: dict) -> dict:
    trunk = load_trunk(trunk_name)
    below = nn.Sequential(trunk.conv_stem, trunk.bn1, *trunk.blocks[:-1]).eval()
    tail = Tail(trunk).eval()

    @torch.inference_mode()
    def run(images):
        pre, pooled = [], []
        for i in range(0, len(images), 256):
            x = F.interpolate(images[i:i + 256].float(), size=(SIZE, SIZE), mode="bilinear", align_corners=False)
            a = below(normalise(x))
            pre.append(a)
            pooled.append(tail(a))
        return torch.cat(pre), torch.cat(pooled)

    out = {}
    for s, d in sub.items():
        out[s] = {k: run(d[k][0] if k != "probes" else d[k]) for k in splits(s) + ("train",)}
    out["tail"] = tail.state_dict()
    return out


# -- models on features ------------------------------------------------------------------------------

class AttnPool(nn.Module):
    """timm's AttentionPool2d form (open_clip's timm_pool "abs_attn"): the feature map's tokens with their mean
    prepended, absolute position embeddings, one multi-head attention whose token-0 output goes through `proj`
    (B, C, h, w) -> (B, d). `proj` is the edit site (a Linear)."""

    def __init__(self, channels: int, d: int, tokens: int = 4, width: int = 256, heads: int = 4):
        super().__init__()
        self.pos = nn.Parameter(channels ** -0.5 * torch.randn(tokens + 1, channels))
        self.qkv = nn.Linear(channels, 3 * width)
        self.proj = nn.Linear(width, d)
        self.heads, self.width = heads, width

    def forward(self, x):
        t = x.flatten(2).transpose(1, 2)
        t = torch.cat([t.mean(1, keepdim=True), t], 1) + self.pos
        B, N, _ = t.shape
        q, k, v = self.qkv(t).reshape(B, N, 3, self.heads, self.width // self.heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q[:, :, :1], k, v)  # (B, heads, 1, width / heads)
        return self.proj(o.reshape(B, self.width))


class HeadModel(nn.Module):
    def __init__(self, form: str, features: int, d: int):
        super().__init__()
        self.form = form
        self.image = (nn.Linear(features, d) if form == "linear" else AttnPool(features, d) if form == "attn" else
                      nn.Sequential(nn.Linear(features, 1024), nn.GELU(), nn.Linear(1024, d)))
        self.text = nn.Linear(384, d)
        self.log_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        self.bias = nn.Parameter(torch.zeros(()), requires_grad=False)

    @property
    def scale(self):
        return self.log_scale.clamp(max=4.6052).exp()


def schedule(step, total, warm=0.05):
    w = max(1, int(total * warm))
    return (step + 1) / w if step < w else 0.5 * (1 + math.cos(math.pi * (step - w) / max(1, total - w)))


def world_adamw(params, lr: float):
    """The world's pre-training optimiser: AdamW (betas 0.9 / 0.98), weight decay 0.05 on matrices only."""
    return torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.05},
                              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.98))


def clipped_step(opt, loss, params) -> None:
    """One optimiser step with the gradient norm clipped at 1."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()


def pretrain(feats: dict, vocab, emb, form: str, d: int, seed: int, steps=2000, batch=256, lr=1e-3) -> HeadModel:
    """LiT on pooled features: CLIP loss + 10 set_overlap + 3 prompt_overlap (the world's terms)."""
    torch.manual_seed(seed)
    model = HeadModel(form, feats[SETS[0]]["train"][1].shape[1], d)
    X = [feats[s]["train"][1] for s in SETS]
    draw = CaptionDraw(SETS, vocab, [SUB[s]["train"][1] for s in SETS], NAME_RATE, 0.4, seed + 1)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = world_adamw(params, lr)
    for step in range(steps):
        for grp in opt.param_groups:
            grp["lr"] = lr * schedule(step, steps)
        drawn = draw(batch)
        x, cap = torch.cat([X[k][idx] for k, idx, _ in drawn]), torch.cat([c for _, _, c in drawn])
        set_ids = torch.cat([torch.full((len(idx),), k) for k, idx, _ in drawn])
        zi, zt = model.image(x), model.text(emb[cap])
        loss = contrastive_loss(zi, zt, cap, model, "clip") + 10 * set_overlap(zi, set_ids) + 3 * prompt_overlap(model.text, emb, draw.name_ids)
        clipped_step(opt, loss, params)
    return model.eval()


def prompt_matrix(model, vocab, emb, s):
    index = {c: i for i, c in enumerate(vocab)}
    with torch.no_grad():
        return F.normalize(model.text(emb[[index[p] for p in SUB[s]["prompts"]]]), dim=-1).double()


def embed_all(image_fn) -> dict:
    """{set: {"test": (n, d), "probes": (N, d)}} unit embeddings (float64) under image_fn(split key, set)."""
    with torch.no_grad():
        return {s: {k: F.normalize(image_fn(s, k), dim=-1).double() for k in splits(s)} for s in SETS}


def splits(s):
    """What is embedded of a set: a task's test split and probes; a control's test split (controls have no probes)."""
    return ("test", "probes") if s in TASK_NAMES else ("test",)


BLOCK_LR = float(os.environ.get("SCREEN_BLOCK_LR", "1e-3"))
LORA_LR = float(os.environ.get("SCREEN_LORA_LR", "1e-2"))
LORA_TARGETS = ["conv_pw", "conv_pwl", "conv_head"]  # the last stage's pointwise convolutions and the 1x1 head conv


def finetune_source(model: HeadModel, feats, tail_state, trunk_name, task, kind, steps=200, batch=64, lr=1e-3, replay=3.0, seed=0):
    """One source: CE over the task's prompts at the model's logit scale + replay; returns the tuned image function."""
    torch.manual_seed(seed)
    head = __import__("copy").deepcopy(model.image)
    tail = None
    if kind in ("block", "lora"):
        trunk = load_trunk(trunk_name)
        tail = Tail(trunk, pool=model.form != "attn")
        tail.load_state_dict(tail_state)
        tail.eval()  # batch-norm statistics frozen; affine parameters train
    if kind == "lora":  # peft LoRA (rank 4, alpha 8) on the last stage's 1x1 convolutions; head and the rest frozen
        from peft import LoraConfig, inject_adapter_in_model

        tail = inject_adapter_in_model(LoraConfig(r=4, lora_alpha=8, target_modules=LORA_TARGETS), tail)
        for p in head.parameters():
            p.requires_grad_(False)
        params = [p for n, p in tail.named_parameters() if "lora_" in n]
    else:
        params = list(head.parameters()) + (list(tail.parameters()) if tail is not None else [])
    key = 1 if kind == "head" else 0  # features index: 1 pooled, 0 activations below the last stage

    def image(x):
        return head(x if tail is None else tail(x))

    G = prompt_matrix(model, VOCAB, EMB, task).float()
    x_tr, y_tr = feats[task]["train"][key], SUB[task]["train"][1]
    g = torch.Generator().manual_seed(seed + 1)
    rep = torch.cat([feats[s]["train"][key][torch.randperm(len(feats[s]["train"][key]), generator=g)[:N_REPLAY]]
                     for s in TASK_NAMES if s != task])
    with torch.no_grad():
        rep_target = F.normalize(image(rep), dim=-1)
    lr = {"block": BLOCK_LR, "lora": LORA_LR}.get(kind, lr)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.1)
    scale = float(model.scale.detach())
    for step in range(steps):
        for grp in opt.param_groups:
            grp["lr"] = lr * schedule(step, steps, 0.1)
        i = torch.randint(0, len(x_tr), (batch,), generator=g)
        z = F.normalize(image(x_tr[i]), dim=-1)
        loss = F.cross_entropy(scale * z @ G.T, y_tr[i])
        r = torch.randint(0, len(rep), (32,), generator=g)
        loss = loss + replay * (F.normalize(image(rep[r]), dim=-1) - rep_target[r]).pow(2).sum(1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return lambda s, k: image(feats[s][k][key])


# -- metrics ---------------------------------------------------------------------------------------

def acc(z, G, y):
    return 100.0 * float(((z @ G.T).argmax(1) == y).double().mean())


def edited(z, X, alpha):
    return F.normalize(z + alpha * z @ X, dim=-1)


def participation_ratio(z):
    z = z - z.mean(0)
    ev = torch.linalg.eigvalsh(z.T @ z)
    return float(ev.sum() ** 2 / (ev ** 2).sum())


@torch.enable_grad()
def linear_probe(ztr, ytr, zte, yte, classes, steps=500):
    """Test top-1 (%) of a multinomial logistic regression on unit embeddings x 20 (Adam, lr 0.05, L2 1e-4).
    (LBFGS with a strong-Wolfe search stopped near its start here: 12 % on shapes, where this reaches 97 %.)"""
    W = torch.zeros(ztr.shape[1], classes, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([W, b], lr=0.05)
    for _ in range(steps):
        loss = F.cross_entropy(20 * ztr @ W + b, ytr) + 1e-4 * W.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return 100.0 * float(((20 * zte @ W + b).argmax(1) == yte).double().mean())


if __name__ == "__main__":
    world = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if world is None:
        from platonic.world.image.build import world_dir
        world = Path(world_dir("full", 0))
    OUT = out_dir()
    DATA = world_data(world)
    VOCAB, EMB = read_captions(world)
    SUB = cached(OUT / "subsample.pt", lambda: subsample(DATA))
    names = os.environ.get("SCREEN_MODELS", ",".join(BASES)).split(",")
    kinds = os.environ.get("SCREEN_KINDS", "head,block").split(",")
    T0 = time.time()
    # per model: base embeddings, prompt matrices, per kind per task: source embeddings
    E, P, S = {}, {}, {}
    for name in names:
        trunk, form, d, seed = BASES[name]
        feats = cached(OUT / f"feats-{trunk}.pt", lambda: trunk_features(trunk, SUB))
        if form == "attn":
            feats = with_maps(feats, trunk)
        tag = f"{name}-nr{NAME_RATE}"
        state = cached(OUT / f"base-{tag}.pt", lambda: pretrain(feats, VOCAB, EMB, form, d, seed).state_dict())
        model = HeadModel(form, 1280, d)
        model.load_state_dict(state)
        model.eval()
        E[name] = embed_all(lambda s, k: model.image(feats[s][k][1]))
        P[name] = {s: prompt_matrix(model, VOCAB, EMB, s) for s in SETS}
        for kind in kinds:
            def make(kind=kind):
                out = {}
                for i, t in enumerate(TASK_NAMES):
                    fn = finetune_source(model, feats, feats["tail"], trunk, t, kind, seed=100 * seed + i)
                    out[t] = embed_all(fn)
                return out
            suffix = (f"-lr{BLOCK_LR:g}" if kind == "block" and BLOCK_LR != 1e-3 else
                      f"-lr{LORA_LR:g}" if kind == "lora" and LORA_LR != 1e-2 else "")
            S[(name, kind)] = cached(OUT / f"sources-{tag}-{kind}{suffix}.pt", make)
        # linear probe and PR of the base embedding
        lp = {}
        with torch.no_grad():
            for t in TASK_NAMES:
                ztr = F.normalize(model.image(feats[t]["train"][1]), dim=-1).double()
                lp[t] = linear_probe(ztr, SUB[t]["train"][1], E[name][t]["test"], SUB[t]["test"][1], len(SUB[t]["prompts"]))
        zs = {s: acc(E[name][s]["test"], P[name][s], SUB[s]["test"][1]) for s in SETS}
        pr = participation_ratio(torch.cat([E[name][t]["probes"] for t in TASK_NAMES]))
        print(json.dumps({"model": name, "zero_shot": round(sum(zs[t] for t in TASK_NAMES) / 8, 1),
                          "probe": round(sum(lp.values()) / 8, 1), "pr": round(pr, 1),
                          "zs": {s: round(v, 1) for s, v in zs.items()}, "lp": {t: round(v, 1) for t, v in lp.items()}}), flush=True)
    # the built world's from-scratch models and their full sources, on the same probes and test subsample
    if os.environ.get("SCREEN_SCRATCH", "1") == "1":
        from platonic.world.backend import load_world_model

        def world_embed(m):
            return embed_all(lambda s, k: m.encode_probes(SUB[s]["test"][0] if k == "test" else SUB[s]["probes"]).z)
        for name in SCRATCH:
            def make_scratch(name=name):
                base = load_world_model(name, root=world)
                out = {"base": world_embed(base), "prompts": {s: F.normalize(base.encode_texts(SUB[s]["prompts"]), dim=-1).double() for s in SETS}}
                for t in TASK_NAMES:
                    out[t] = world_embed(load_world_model(f"{name}/{t}", root=world))
                return out
            w = cached(OUT / f"scratch-{name}.pt", make_scratch)
            E[name], P[name], S[(name, "full")] = w["base"], w["prompts"], {t: w[t] for t in TASK_NAMES}
    # -- per model and source kind: gains, oracle, recovery, locality
    summary = {}
    for (name, kind), src in S.items():
        gains, oracle_own, oracle_other, oracle_ctrl = {}, {}, {}, {}
        for t in TASK_NAMES:
            zs_t = acc(E[name][t]["test"], P[name][t], SUB[t]["test"][1])
            gains[t] = acc(src[t][t]["test"], P[name][t], SUB[t]["test"][1]) - zs_t
            U = (src[t][t]["probes"] - E[name][t]["probes"]) @ P[name][t].T
            X = solve(E[name][t]["probes"], P[name][t], U)
            ch = {s: acc(edited(E[name][s]["test"], X, 1.0), P[name][s], SUB[s]["test"][1]) - acc(E[name][s]["test"], P[name][s], SUB[s]["test"][1]) for s in SETS}
            oracle_own[t] = ch[t]
            oracle_other[t] = sum(ch[s] for s in TASK_NAMES if s != t) / 7
            oracle_ctrl[t] = sum(ch[c] for c in CONTROL_NAMES) / len(CONTROL_NAMES)
        rec = sum(oracle_own.values()) / max(1e-9, sum(gains.values()))
        loc = (sum(-min(0, oracle_other[t]) for t in TASK_NAMES) / 8) / max(1e-9, sum(oracle_own.values()) / 8)
        summary[(name, kind)] = dict(gain=sum(gains.values()) / 8, own=sum(oracle_own.values()) / 8, other=sum(oracle_other.values()) / 8,
                                     ctrl=sum(oracle_ctrl.values()) / 8, recovery=rec, locality=loc)
        print(json.dumps({"model": name, "kind": kind, **{k: round(v, 3) for k, v in summary[(name, kind)].items()},
                          "gains": {t: round(v, 1) for t, v in gains.items()}, "oracle_own": {t: round(v, 1) for t, v in oracle_own.items()},
                          "oracle_other": {t: round(v, 1) for t, v in oracle_other.items()}}), flush=True)
    # -- descriptor agreement and transfer, per (source, target), for each trunk source kind against scratch "full"
    for kind in kinds:
        pool = [(n, kind) for n in names] + [(n, "full") for n in SCRATCH if (n, "full") in S]
        def desc(n, k, s_, t):  # what n's fine-tune on s_ changed on t's grid (N_t, M_t)
            return (S[(n, k)][s_][t]["probes"] - E[n][t]["probes"]) @ P[n][t].T
        U = {(n, t): desc(n, k, t, t) for n, k in pool for t in TASK_NAMES}
        cos = lambda a, b: float(F.cosine_similarity(a.flatten(), b.flatten(), dim=0))
        same = {t: [cos(U[(a, t)], U[(b, t)]) for i, (a, _) in enumerate(pool) for b, _ in pool[i + 1:]] for t in TASK_NAMES}
        cross = {t: [cos(desc(n, k, s_, t), U[(n, t)]) for n, k in pool for s_ in TASK_NAMES if s_ != t] for t in TASK_NAMES}
        trunk_only = [n for n, _ in pool if n in BASES]
        same_trunk = [cos(U[(a, t)], U[(b, t)]) for t in TASK_NAMES for i, a in enumerate(trunk_only) for b in trunk_only[i + 1:]]
        print(json.dumps({"kind": kind, "same_task_cosine": round(sum(sum(v) for v in same.values()) / sum(len(v) for v in same.values()), 3),
                          "cross_task_cosine": round(sum(sum(v) for v in cross.values()) / sum(len(v) for v in cross.values()), 3),
                          "same_task_trunk_pairs": round(sum(same_trunk) / max(1, len(same_trunk)), 3),
                          "per_task_same": {t: round(sum(v) / len(v), 3) for t, v in same.items()}}), flush=True)
        for alpha in (0.5, 1.0):
            rows = []
            for a, _ in pool:
                for b, _ in pool:
                    if a == b:
                        continue
                    tr_gain, or_gain, ctrl = 0.0, 0.0, 0.0
                    for t in TASK_NAMES:
                        F0, G = E[b][t]["probes"], P[b][t]
                        base_acc = acc(E[b][t]["test"], G, SUB[t]["test"][1])
                        Xt = solve(F0, G, U[(a, t)])
                        Xo = solve(F0, G, U[(b, t)])
                        tr_gain += acc(edited(E[b][t]["test"], Xt, alpha), G, SUB[t]["test"][1]) - base_acc
                        or_gain += acc(edited(E[b][t]["test"], Xo, alpha), G, SUB[t]["test"][1]) - base_acc
                        ctrl += sum(acc(edited(E[b][c]["test"], Xt, alpha), P[b][c], SUB[c]["test"][1])
                                    - acc(E[b][c]["test"], P[b][c], SUB[c]["test"][1]) for c in CONTROL_NAMES) / len(CONTROL_NAMES)
                    rows.append({"source": a, "target": b, "transfer": round(tr_gain / 8, 2), "oracle": round(or_gain / 8, 2),
                                 "retention": round(tr_gain / max(1e-9, or_gain), 3), "control": round(ctrl / 8, 2)})
            for r in rows:
                print(json.dumps({"kind": kind, "alpha": alpha, **r}), flush=True)
    print(json.dumps({"seconds": round(time.time() - T0)}), flush=True)
