"""Research harness (not part of the package, not tested): from-scratch towers for the world on real trunks
(issue 33), trained from random weights with a trunk model as teacher, screened before any build.

The built world's from-scratch towers, pre-trained on captions alone, keep 0.14-0.45 of their fine-tunes
under the oracle and their descriptors keep 42 % of a trunk's oracle (docs/lab/2026-12-04-trunk-world-screen.md).
A candidate remedy: the same small architectures (the world's ViT, ResNet, mixer nets), trained from scratch on
the world's images with the contrastive loss on rarely-naming captions plus a distillation term towards a
trunk base's image embeddings (1 - cos(P z_student, z_teacher), P a trainable d_s x d_t map thrown away
after), so they inherit an embedding with linear headroom while staying another family.

Sources are the built world's full-source recipe (every tower parameter; 128 steps of 64, lr 1e-3, wd 0.1,
warm-up 10 % + cosine, the model's own logit scale, replay rho 3 over 64 train images of every other task).
Writes OUT/scratch-student-ARCH.pt in the format `trunk_screen.py` reads for its from-scratch models, so
    SCREEN_SCRATCH_MODELS=vit-a,resnet,mixer,student-vit python research/trunk_screen.py
puts the students in its tables.

Usage: python research/student_screen.py ARCH [ARCH ...]   (vit, resnet, mixer); run trunk_screen.py first
(the subsample, the teacher's features and base). Env: STUDENT_TEACHER (lite0-linear), STUDENT_DISTILL
(weight, 5), STUDENT_STEPS (1500), STUDENT_NAME_RATE (0.03), STUDENT_TAG (''), STUDENT_SOURCE (full | last; last needs a
tower with `blocks`: vit, mixer),
SCREEN_THREADS (1). The pre-trained student is kept as OUT/student-ARCH{TAG}.pt and reused.
"""
import copy
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))
import trunk_screen as TS  # noqa: E402

from platonic.world.common.jobs import read_captions  # noqa: E402
from platonic.world.common.losses import contrastive_loss  # noqa: E402
from platonic.world.image.build import world_dir  # noqa: E402
from platonic.world.image.data import TASK_NAMES  # noqa: E402
from platonic.world.image.nets import TOWERS  # noqa: E402
from platonic.world.image.zoo import normalise_pixels  # noqa: E402

torch.set_num_threads(int(os.environ.get("SCREEN_THREADS", "1")))
ARCHS = {  # the built world's nets and input sizes (platonic.world.image.zoo.SPECS)
    "vit": ({"img": 32, "patch": 4, "width": 64, "depth": 4, "heads": 4}, 32, 128),
    "resnet": ({"img": 24, "widths": (24, 48, 96)}, 24, 144),
    "mixer": ({"img": 32, "patch": 4, "width": 112, "depth": 4}, 32, 112),
}
TEACHER = os.environ.get("STUDENT_TEACHER", "lite0-linear")
DISTILL = float(os.environ.get("STUDENT_DISTILL", "5"))
STEPS = int(os.environ.get("STUDENT_STEPS", "1500"))
NAME_RATE = float(os.environ.get("STUDENT_NAME_RATE", "0.03"))
TAG = os.environ.get("STUDENT_TAG", "")  # appended to the model's name: student-ARCH{TAG}
# "full": every tower parameter (the built world's sources); "last": the last block and what follows it
SOURCE = os.environ.get("STUDENT_SOURCE", "full")


def trainable(name: str, depth: int) -> bool:
    """Whether a tower parameter trains in a source of kind SOURCE ("last": the last of `blocks` and the
    layers after it, e.g. the ViT's last block, ln_post and proj)."""
    if SOURCE == "full":
        return True
    return name.startswith(f"blocks.{depth - 1}.") or not name.startswith(("patch", "cls", "pos", "blocks.", "stem", "stages."))


class Student(nn.Module):
    def __init__(self, arch: str, d_teacher: int):
        super().__init__()
        kwargs, self.size, d = ARCHS[arch]
        self.image = TOWERS[arch](**kwargs, embed_dim=d)
        self.text = nn.Linear(384, d)
        self.log_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        self.bias = nn.Parameter(torch.zeros(()), requires_grad=False)
        self.to_teacher = nn.Linear(d, d_teacher, bias=False)  # P: only for the distillation term

    @property
    def scale(self):
        return self.log_scale.clamp(max=4.6052).exp()

    def embed(self, images):
        return self.image(normalise_pixels(images, self.size))


def pretrain(student, images, labels, teacher_z, vocab, emb, seed, batch=128, lr=2e-3):
    """images[k] (n_k, 3, 32, 32) uint8, labels[k], teacher_z[k] (n_k, d_t) unit; contrastive + DISTILL * (1 - cos)."""
    draw = TS.CaptionDraw(TS.SETS, vocab, labels, NAME_RATE, 0.4, seed)
    params = [p for p in student.parameters() if p.requires_grad]
    opt = TS.world_adamw(params, lr)
    student.train()
    for step in range(STEPS):
        for grp in opt.param_groups:
            grp["lr"] = lr * TS.schedule(step, STEPS)
        drawn = draw(batch)
        x, cap = torch.cat([images[k][idx] for k, idx, _ in drawn]), torch.cat([c for _, _, c in drawn])
        t = torch.cat([teacher_z[k][idx] for k, idx, _ in drawn])
        zi = student.embed(x)
        loss = contrastive_loss(zi, student.text(emb[cap]), cap, student, "clip")
        loss = loss + DISTILL * (1 - F.cosine_similarity(student.to_teacher(zi), t, dim=-1)).mean()
        TS.clipped_step(opt, loss, params)
    return student.eval()


def prompts_of(student, vocab, emb, s):
    index = {c: i for i, c in enumerate(vocab)}
    with torch.no_grad():
        return F.normalize(student.text(emb[[index[p] for p in TS.SUB[s]["prompts"]]]), dim=-1).double()


def embed_sets(tower_fn):
    with torch.no_grad():
        return {s: {k: F.normalize(tower_fn(TS.SUB[s]["test"][0] if k == "test" else TS.SUB[s]["probes"]), dim=-1).double()
                    for k in TS.splits(s)} for s in TS.SETS}


def full_source(student, task, G, seed, steps=128, batch=64, lr=1e-3, replay=3.0):
    """The world's full-source recipe on the student's image tower; returns the tuned tower."""
    torch.manual_seed(seed)
    tower = copy.deepcopy(student.image).train()
    depth = len(tower.blocks)
    params = [p for n, p in tower.named_parameters() if trainable(n, depth)]
    for n, p in tower.named_parameters():
        p.requires_grad_(trainable(n, depth))

    def z(x):
        return tower(normalise_pixels(x, student.size))
    g = torch.Generator().manual_seed(seed + 1)
    x_tr, y_tr = TS.SUB[task]["train"]
    rep = torch.cat([TS.SUB[s]["train"][0][torch.randperm(len(TS.SUB[s]["train"][0]), generator=g)[:TS.N_REPLAY]]
                     for s in TASK_NAMES if s != task])
    with torch.no_grad():
        rep_target = F.normalize(student.embed(rep), dim=-1)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.1)
    scale = float(student.scale.detach())
    for step in range(steps):
        for grp in opt.param_groups:
            grp["lr"] = lr * TS.schedule(step, steps, 0.1)
        i = torch.randint(0, len(x_tr), (batch,), generator=g)
        loss = F.cross_entropy(scale * F.normalize(z(x_tr[i]), dim=-1) @ G.T, y_tr[i])
        r = torch.randint(0, len(rep), (32,), generator=g)
        loss = loss + replay * (F.normalize(z(rep[r]), dim=-1) - rep_target[r]).pow(2).sum(1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return tower.eval()


if __name__ == "__main__":
    world = Path(world_dir("full", 0))
    out = TS.out_dir()
    TS.SUB = torch.load(out / "subsample.pt", weights_only=False)
    vocab, emb = read_captions(world)
    trunk, form, d_t, _ = TS.BASES[TEACHER]
    feats = torch.load(out / f"feats-{trunk}.pt", weights_only=False)
    teacher = TS.HeadModel(form, 1280, d_t)
    teacher.load_state_dict(torch.load(out / f"base-{TEACHER}-nr{TS.NAME_RATE}.pt"))
    with torch.no_grad():
        teacher_z = [F.normalize(teacher.image(feats[s]["train"][1]), dim=-1) for s in TS.SETS]
    for i, arch in enumerate(sys.argv[1:]):
        t0 = time.time()
        torch.manual_seed(500 + i)
        student = Student(arch, d_t)
        saved = out / f"student-{arch}{TAG}.pt"  # the pre-trained student, reused by later source kinds
        if saved.exists():
            student.load_state_dict(torch.load(saved))
            student.eval()
        else:
            student = pretrain(student, [TS.SUB[s]["train"][0] for s in TS.SETS], [TS.SUB[s]["train"][1] for s in TS.SETS],
                               teacher_z, vocab, emb, seed=600 + i)
            torch.save(student.state_dict(), saved)
        t1 = time.time()
        P = {s: prompts_of(student, vocab, emb, s) for s in TS.SETS}
        record = {"base": embed_sets(student.embed), "prompts": P}
        for j, t in enumerate(TASK_NAMES):
            tower = full_source(student, t, P[t].float(), seed=700 + 10 * i + j)
            record[t] = embed_sets(lambda x: tower(normalise_pixels(x, student.size)))
        E = record["base"]
        with torch.no_grad():
            lp = {t: TS.linear_probe(F.normalize(student.embed(TS.SUB[t]["train"][0]), dim=-1).double(), TS.SUB[t]["train"][1],
                                     E[t]["test"], TS.SUB[t]["test"][1], len(TS.SUB[t]["prompts"])) for t in TASK_NAMES}
        zs = {s: TS.acc(E[s]["test"], P[s], TS.SUB[s]["test"][1]) for s in TS.SETS}
        pr = TS.participation_ratio(torch.cat([E[t]["probes"] for t in TASK_NAMES]))
        name = f"student-{arch}{TAG}{'' if SOURCE == 'full' else '-' + SOURCE}"
        torch.save(record, out / f"scratch-{name}.pt")
        print(json.dumps({"model": name, "source": SOURCE, "teacher": TEACHER, "distill": DISTILL, "steps": STEPS,
                          "zero_shot": round(sum(zs[t] for t in TASK_NAMES) / 8, 1), "probe": round(sum(lp.values()) / 8, 1),
                          "pr": round(pr, 1), "zs": {s: round(v, 1) for s, v in zs.items()}, "lp": {t: round(v, 1) for t, v in lp.items()},
                          "seconds": {"pretrain": round(t1 - t0), "sources": round(time.time() - t1)}}), flush=True)
