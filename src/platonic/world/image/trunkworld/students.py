"""Towers trained from scratch in the trunk world ("students"), built on request beside its trunk models.

A student (`recipe.STUDENTS`: open_clip's ModifiedResNet) is a real open_clip model on the frozen MiniLM, drawn from
random weights and pre-trained on every train image of the world's sets (`pretrain_student`, the loss of
`recipe.StudentRecipe`: the world's CLIP loss and overlap terms plus a distillation term towards a trunk model's
image embedding). Its sources are the trunk world's (`sources.train_source` on activations below its cut:
layer4 + attention pool, or LoRA on layer4's convolutions).

Built files sit beside the trunk models' (models/NAME/, activations/NAME.safetensors, sources/NAME/TASK.KIND...),
and `STUDENTS.json` says which students and kinds are built under which recipe (`recipe.student_hash`); a
student build does not touch the trunk models, and a changed student recipe rebuilds the students only.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F

from ....progress import LineProgress
from ....storage import atomic_write
from ...common.jobs import build_workers, set_determinism
from ...common.losses import contrastive_loss, prompt_overlap, set_overlap
from ...common.weights import load_weights, save_weights
from .. import data as world_data
from ..build import check_kinds
from ..openclip_models import build_openclip_model, quiet_open_clip, write_openclip_dir
from .build import model_spec, pretrain_then_sources, read_captions, read_data, require_built
from .pretrain import MAX_LOG_SCALE, CaptionDraw, CappedScale, schedule
from .recipe import STUDENT_NAMES, STUDENT_PROFILES, STUDENTS, StudentRecipe, student_hash
from .tower import Above, activations, model_input

MARKER = "STUDENTS.json"
SETS = world_data.TASK_NAMES + world_data.CONTROL_NAMES


def pretrain_student(model, spec, images: list[torch.Tensor], draw: CaptionDraw, text_features: torch.Tensor,
                     teacher: list[torch.Tensor], recipe: StudentRecipe) -> dict:
    """Train `model.visual`, `model.text.proj` and `model.logit_scale` in place (the caller seeds torch).

    images[k] (n_k, 3, s, s) uint8: set k's train images in `draw`'s set order; teacher[k] (n_k, d_t) their teacher
    embeddings (unit rows); text_features (V, 384) MiniLM features of the caption vocabulary. Per step:

        L = CLIP(z, proj(t)) + set_overlap x overlap + prompt_overlap x overlap + distill x mean(1 - cos(P z, z_t))

    z = visual(model_input(x)) (B, d), P (d_t, d) trained beside and dropped. Returns statistics."""
    to_teacher = torch.nn.Linear(spec.embed_dim, teacher[0].shape[1], bias=False)
    proj = model.text.proj
    params = [*model.visual.parameters(), *proj.parameters(), model.logit_scale]
    extra = list(to_teacher.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2] + extra, "weight_decay": 0.05},
                             {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
                            lr=recipe.lr, betas=(0.9, 0.98))
    scale = CappedScale(model)
    model.visual.train()
    losses = []
    for step in range(recipe.steps):
        for group in opt.param_groups:
            group["lr"] = recipe.lr * schedule(step, recipe.steps, 0.05)
        drawn = draw(recipe.batch)
        x = torch.cat([images[k][idx] for k, idx, _ in drawn])
        caps = torch.cat([c for _, _, c in drawn])
        target = torch.cat([teacher[k][idx] for k, idx, _ in drawn])
        set_ids = torch.cat([torch.full((len(idx),), k) for k, idx, _ in drawn])
        zi, zt = model.visual(model_input(x, spec)), proj(text_features[caps])
        loss = (contrastive_loss(zi, zt, caps, scale, "clip") + recipe.set_overlap * set_overlap(zi, set_ids)
                + recipe.prompt_overlap * prompt_overlap(proj, text_features, draw.name_ids)
                + recipe.distill * (1 - F.cosine_similarity(to_teacher(zi), target, dim=-1)).mean())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params + extra, 1.0)
        opt.step()
        losses.append(loss.item())
    model.visual.eval()
    with torch.no_grad():
        model.logit_scale.clamp_(max=MAX_LOG_SCALE)
    tail = losses[-20:] or [float("nan")]
    return {"steps": recipe.steps, "final_loss": sum(tail) / len(tail), "logit_scale": model.logit_scale.detach().exp().item()}


def teacher_embeddings(path: Path, teacher: str) -> list[torch.Tensor]:
    """[(n_k, d_t)] unit image embeddings of the teacher trunk model's train items, set by set (from its cached
    activations, through the part above its cut)."""
    import open_clip

    acts, _ = load_weights(path / "activations" / f"{teacher}.safetensors")
    model = quiet_open_clip(lambda: open_clip.create_model(f"local-dir:{path / 'models' / teacher}")).eval()
    above = Above(model.visual)
    with torch.no_grad():
        return [F.normalize(torch.cat([above(acts[s][i:i + 1024]) for i in range(0, len(acts[s]), 1024)]), dim=-1)
                for s in SETS]


def job_student(path: str, profile: str, seed: int, name: str) -> dict:
    """Student `name`: drawn by open_clip's factory, pre-trained (`pretrain_student`), its train activations below
    the cut written, written as an open_clip directory."""
    set_determinism(1)
    path, recipe = Path(path), STUDENT_PROFILES[profile].pretrain
    data, (vocab, text) = read_data(path), read_captions(path)
    spec = model_spec(name, seed)
    teacher = teacher_embeddings(path, recipe.teacher)
    model = build_openclip_model(spec)
    draw = CaptionDraw(SETS, vocab, [data[s].train.labels for s in SETS], recipe.name_rate, recipe.hint_rate,
                       spec.seed + 1)
    torch.manual_seed(spec.seed)
    t0 = time.perf_counter()
    stats = pretrain_student(model, spec, [data[s].train.images for s in SETS], draw, text, teacher, recipe)
    stats["seconds"] = time.perf_counter() - t0
    model.eval()
    acts = {s: activations(model.visual, data[s].train.images, spec) for s in SETS}
    save_weights(path / "activations" / f"{name}.safetensors", acts, {"model": name, "below": "stem + layer1-3"})
    write_openclip_dir(model, spec, path / "models" / name)
    return {"model": name, **stats}


def built_students(path: Path) -> tuple[str, ...]:
    """The source kinds of the students built at `path` under the current student recipe; () if none are."""
    marker = Path(path) / MARKER
    if not marker.exists():
        return ()
    record = json.loads(marker.read_text())
    build = json.loads((Path(path) / "build.json").read_text())
    if record.get("recipe") != student_hash(build["profile"], int(build["seed"])):
        return ()
    return tuple(record.get("kinds", ()))


def ensure_students(path: Path, kinds=("full",), progress: bool = True, workers: int | None = None) -> Path:
    """Build what the built trunk world at `path` lacks of its students: the pre-trained students (again when their
    recipe changed) and their sources of `kinds`. Returns `path`; the trunk models are left as they are."""
    path = require_built(path)
    kinds = check_kinds(kinds)
    have = built_students(path)
    if set(kinds) <= set(have):
        return path
    build = json.loads((path / "build.json").read_text())
    profile, seed = build["profile"], int(build["seed"])
    args = (str(path), profile, seed)
    record = json.loads((path / MARKER).read_text()) if have else {"timings_s": {}, "pretrain": {}, "finetune_seconds": {}}
    if not have:
        (path / MARKER).unlink(missing_ok=True)
        for name in STUDENT_NAMES:
            shutil.rmtree(path / "models" / name, ignore_errors=True)
            shutil.rmtree(path / "sources" / name, ignore_errors=True)
    missing = tuple(k for k in kinds if k not in have)
    total = (0 if have else len(STUDENT_NAMES)) + len(STUDENT_NAMES) * len(world_data.TASK_NAMES)
    lines = LineProgress(total, f"trunk world ({profile}): students, {' and '.join(missing)} sources", enabled=progress)
    t0 = time.perf_counter()
    pre_stats, src_stats = pretrain_then_sources(job_student, STUDENT_NAMES, args, missing, build_workers(workers),
                                                 lines, pretrained=bool(have))
    record["pretrain"].update(pre_stats)
    for res in src_stats:
        record["finetune_seconds"].setdefault(f"{res['model']}/{res['task']}", {}).update({k: res[k] for k in missing})
    record["timings_s"][f"students_{'_'.join(missing)}"] = time.perf_counter() - t0
    record.update(recipe=student_hash(profile, seed), kinds=list(check_kinds((*have, *missing))),
                  students={n: asdict(STUDENTS[n]) for n in STUDENT_NAMES},
                  profile={"pretrain": asdict(STUDENT_PROFILES[profile].pretrain),
                           "sources": {k: asdict(v) for k, v in STUDENT_PROFILES[profile].sources.items()}})
    atomic_write(path / MARKER, lambda tmp: Path(tmp).write_text(json.dumps(record, indent=1, sort_keys=True)))
    lines.note("students complete")
    return path
