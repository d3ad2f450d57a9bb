"""Towers trained from scratch in the trunk world ("students"), built on request beside its trunk models.

A student (`recipe.STUDENTS`: two of open_clip's ModifiedResNet, one of timm's hybrid ViTs under open_clip's timm
tower) is a real open_clip model on the frozen MiniLM, drawn from random weights and pre-trained on every train
image of the world's sets (`pretrain_student`, the loss of `recipe.StudentRecipe`: the world's CLIP loss and
overlap terms plus a distillation term towards a trunk model's image embedding). Its sources are the trunk world's
(`sources.train_source` on activations below its cut, per tower family `tower.cut_of`: layer4 + attention pool, or
LoRA on layer4's convolutions; the ViT's last block and head, or LoRA on its attention).

Built files sit beside the trunk models' (models/NAME/, activations/NAME.safetensors, sources/NAME/TASK.KIND...),
and `STUDENTS.json` says which kinds of which student are built under which recipe (`recipe.student_hash`, one
per student). A student is built on request, alone (`ensure_students(path, kinds, names)`); a student build does
not touch the trunk models or the other students, and a changed recipe rebuilds that student only: its sources
alone when only their recipe changed (`recipe.student_pretrain_hash` keys the pre-training).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F

from ....errors import InvalidInputError
from ....progress import LineProgress
from ....storage import atomic_write
from ...common.jobs import build_workers, set_determinism
from ...common.weights import load_weights, save_weights
from .. import data as world_data
from ...common.kinds import KINDS, check_kinds
from ..openclip_models import build_openclip_model, open_world_openclip_dir, write_openclip_dir
from .build import SETS, model_spec, pretrain_then_sources, read_captions, read_data, require_built
from .pretrain import CaptionDraw, contrastive_pretrain
from .recipe import (STUDENT_NAMES, STUDENT_PROFILES, STUDENTS, StudentRecipe, student_hash, student_pretrain_hash,
                     students_hash)
from .tower import Above, activations, cut_of, model_input

MARKER = "STUDENTS.json"


def pretrain_student(model, spec, images: list[torch.Tensor], draw: CaptionDraw, text_features: torch.Tensor,
                     teacher: list[torch.Tensor], recipe: StudentRecipe) -> dict:
    """Train `model.visual`, `model.text.proj` and `model.logit_scale` in place (`pretrain.contrastive_pretrain`;
    the caller seeds torch).

    images[k] (n_k, 3, s, s) uint8: set k's train images in `draw`'s set order; teacher[k] (n_k, d_t) their teacher
    embeddings (unit rows); text_features (V, 384) MiniLM features of the caption vocabulary. Per step:

        L = CLIP(z, proj(t)) + set_overlap x overlap + prompt_overlap x overlap + distill x mean(1 - cos(P z, z_t))

    z = visual(model_input(x)) (B, d), P (d_t, d) trained beside and dropped. Returns statistics."""
    to_teacher = torch.nn.Linear(spec.embed_dim, teacher[0].shape[1], bias=False)

    def distillation(z: torch.Tensor, drawn) -> torch.Tensor:
        target = torch.cat([teacher[k][idx] for k, idx, _ in drawn])
        return recipe.distill * (1 - F.cosine_similarity(to_teacher(z), target, dim=-1)).mean()

    return contrastive_pretrain(model, model.visual, lambda x: model.visual(model_input(x, spec)), images, draw,
                                text_features, recipe, recipe.steps, to_teacher.parameters(), distillation)


def teacher_embeddings(path: Path, teacher: str) -> list[torch.Tensor]:
    """[(n_k, d_t)] unit image embeddings of the teacher trunk model's train items, set by set (from its cached
    activations, through the part above its cut)."""
    acts, _ = load_weights(path / "activations" / f"{teacher}.safetensors")
    model = open_world_openclip_dir(path / "models" / teacher).eval()
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
                       spec.seed + 1, recipe.set_name_rates)
    torch.manual_seed(spec.seed)
    t0 = time.perf_counter()
    stats = pretrain_student(model, spec, [data[s].train.images for s in SETS], draw, text, teacher, recipe)
    stats["seconds"] = time.perf_counter() - t0
    model.eval()
    acts = {s: activations(model.visual, data[s].train.images, spec) for s in SETS}
    save_weights(path / "activations" / f"{name}.safetensors", acts, {"model": name, "below": cut_of(model.visual).family})
    write_openclip_dir(model, spec, path / "models" / name)
    return {"model": name, **stats}


def check_students(names) -> tuple[str, ...]:
    """`names` as a tuple, each a declared student (`recipe.STUDENTS`); an unknown name is refused."""
    names = (names,) if isinstance(names, str) else tuple(names)
    unknown = [n for n in names if n not in STUDENTS]
    if unknown or not names:
        raise InvalidInputError(f"unknown trunk world student(s) {', '.join(unknown) or '(none given)'}; the students "
                                f"are {', '.join(STUDENT_NAMES)}")
    return names


def _marker(path: Path) -> dict:
    """The students' build record at `path`: "built" (name -> its recipe, pre-training recipe, kinds, statistics),
    "timings_s"; an empty one when none (or a record of an earlier layout) is there."""
    record = json.loads((path / MARKER).read_text()) if (path / MARKER).exists() else {}
    return record if "built" in record else {"built": {}, "timings_s": {}}


def _world(path: Path) -> tuple[str, int]:
    build = json.loads((path / "build.json").read_text())
    return build["profile"], int(build["seed"])


def built_students(path: Path, names=STUDENT_NAMES) -> tuple[str, ...]:
    """The source kinds built at `path` for every student of `names` under its current recipe; () if one of them
    is not built."""
    path, names = Path(path), check_students(names)
    profile, seed = _world(path)
    built = _marker(path)["built"]
    have = [set(built[n]["kinds"]) if built.get(n, {}).get("recipe") == student_hash(profile, seed, n) else set()
            for n in names]
    return tuple(k for k in KINDS if all(k in h for h in have))


def ensure_students(path: Path, kinds=("full",), names=STUDENT_NAMES, progress: bool = True,
                    workers: int | None = None) -> Path:
    """Build what the built trunk world at `path` lacks of students `names`: a student pre-trained again when its
    pre-training recipe changed, its sources again when its recipe changed, and its sources of `kinds`. Returns
    `path`; the trunk models and the other students are left as they are."""
    path = require_built(path)
    kinds, names = check_kinds(kinds), check_students(names)
    if set(kinds) <= set(built_students(path, names)):
        return path
    profile, seed = _world(path)
    record = _marker(path)
    todo, pretrained = {}, set()
    for name in names:
        entry = record["built"].get(name, {})
        if entry.get("pretrain_recipe") == student_pretrain_hash(profile, seed, name):
            pretrained.add(name)
        else:  # not built, or pre-trained under another recipe
            entry = {}
            shutil.rmtree(path / "models" / name, ignore_errors=True)
        if entry.get("recipe") != student_hash(profile, seed, name):  # sources of another recipe (or none)
            entry = {**entry, "kinds": [], "finetune_seconds": {}}
            shutil.rmtree(path / "sources" / name, ignore_errors=True)
        record["built"][name] = entry
        todo[name] = tuple(k for k in kinds if k not in entry["kinds"])
    jobs = sum(name not in pretrained for name in names) + sum(bool(k) for k in todo.values()) * len(world_data.TASK_NAMES)
    lines = LineProgress(jobs, f"trunk world ({profile}): students {', '.join(names)}", enabled=progress)
    t0 = time.perf_counter()
    pre_stats, src_stats = pretrain_then_sources(job_student, todo, (str(path), profile, seed), build_workers(workers),
                                                 lines, pretrained=pretrained)
    for res in src_stats:
        seconds = record["built"][res["model"]]["finetune_seconds"].setdefault(res["task"], {})
        seconds.update({k: res[k] for k in todo[res["model"]]})
    for name in names:
        entry = record["built"][name]
        entry.update(recipe=student_hash(profile, seed, name), pretrain_recipe=student_pretrain_hash(profile, seed, name),
                     kinds=list(check_kinds((*entry["kinds"], *todo[name]))), spec=asdict(STUDENTS[name]),
                     sources={k: asdict(v) for k, v in STUDENT_PROFILES[profile].sources_of(name).items()})
        if name in pre_stats:
            entry["pretrain"] = pre_stats[name]
    worked = [n for n in names if n not in pretrained or todo[n]]  # what this call built: "NAME (pre-training, KINDS)"
    record["timings_s"][", ".join(f"{n} ({', '.join(('pre-training',) * (n not in pretrained) + todo[n])})"
                                  for n in worked)] = time.perf_counter() - t0
    every = all(record["built"].get(n, {}).get("recipe") == student_hash(profile, seed, n) for n in STUDENT_NAMES)
    record.update(recipe=students_hash(profile, seed) if every else None,  # what a report on all of them reads
                  pretrain=asdict(STUDENT_PROFILES[profile].pretrain))
    atomic_write(path / MARKER, lambda tmp: Path(tmp).write_text(json.dumps(record, indent=1, sort_keys=True)))
    lines.note("students complete")
    return path
