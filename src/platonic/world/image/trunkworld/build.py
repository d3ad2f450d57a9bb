"""Build the trunk world: data, caption features, trunk activations, pre-training, sources. Cached by recipe.

Layout of a built trunk world (one directory per version x profile x seed x recipe hash, `recipe.trunk_world_dir`):

    data.safetensors                 every split of every task and control (uint8, 32 px) + probe indices
    captions.safetensors             "features" (V, 384): MiniLM mean-pooled features of the caption vocabulary
    activations/NAME.safetensors     per set: the train split's activations below the trunk's last stage
    models/NAME/                     the pre-trained model, an open_clip local directory (`write_openclip_dir`)
    sources/NAME/TASK.KIND.safetensors   a source's tower part above the activations (open_clip names)
    build.json, COMPLETE             timings and settings; the marker naming the source kinds built

Jobs run in single-threaded worker processes started by a fork server (`common.jobs.worker_pool`), each seeded
on its own, so the weights do not depend on the number of workers. The LoRA sources are built on first use, as in
the tiny-tower world (`ensure_trunk_world(kinds=...)`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from concurrent.futures import as_completed
from dataclasses import asdict, replace
from pathlib import Path

import torch
from safetensors import safe_open

from ....environment import cpu_record, library_versions
from ....errors import InvalidInputError
from ....progress import LineProgress
from ....storage import write_tensors
from ...common.jobs import build_workers, model_seed, set_determinism, worker_pool, write_build_record
from ...common.weights import META_KEY, load_weights, save_weights
from .. import data as world_data
from ..openclip_models import build_openclip_model, relocate_openclip_dir, write_openclip_dir
from .pretrain import CaptionDraw, caption_features, pretrain_heads
from ...common.kinds import KINDS, built_kinds, check_kinds
from .recipe import (CONTROL_NAMES, MODEL_NAMES, MODELS, STUDENT_PROFILES, STUDENTS, TASK_VARIANTS, TRUNK_WORLD_VERSION,
                     check_profile, trunk_world_dir)
from .sources import train_source
from .tower import Above, activations, cut_of

SETS = world_data.TASK_NAMES + CONTROL_NAMES  # the pre-training sets, in this order


def default_profile() -> str:
    profile = os.environ.get("PLATONIC_WORLD_PROFILE", "full")
    check_profile(profile)
    return profile


def model_spec(name: str, seed: int):
    """Model `name`'s spec (a trunk model or a student) in the world of seed `seed` (its random weights drawn under
    `common.jobs.model_seed`)."""
    spec = MODELS[name] if name in MODELS else STUDENTS[name]
    return replace(spec, seed=model_seed(spec, seed))


def source_recipes(profile: str, name: str) -> dict:
    """kind -> SourceRecipe of model `name` (a trunk model or a student) in `profile`."""
    return STUDENT_PROFILES[profile].sources_of(name) if name in STUDENTS else check_profile(profile).sources


# -- worker side ----------------------------------------------------------------------------------

def read_data(path: Path) -> dict:
    with safe_open(str(Path(path) / "data.safetensors"), framework="pt") as f:
        return world_data.data_from_tensors({k: f.get_tensor(k) for k in f.keys()})


def read_captions(path: Path) -> tuple[list[str], torch.Tensor]:
    tensors, meta = load_weights(Path(path) / "captions.safetensors")
    return meta["vocab"], tensors["features"]


def job_pretrain(path: str, profile: str, seed: int, name: str) -> dict:
    """Model `name`: open_clip's factory (wheel trunk, MiniLM), its train activations (written), LiT pre-training,
    written as an open_clip directory."""
    set_determinism(1)
    path, prof = Path(path), check_profile(profile)
    data, (vocab, text) = read_data(path), read_captions(path)
    spec = model_spec(name, seed)
    t0 = time.perf_counter()
    model = build_openclip_model(spec)
    acts = {s: activations(model.visual, data[s].train.images, spec) for s in SETS}
    save_weights(path / "activations" / f"{name}.safetensors", acts, {"model": name, "below": "trunk.blocks[:-1]"})
    seconds_activations = time.perf_counter() - t0
    with torch.no_grad():
        features = [Above(model.visual).trunk_features(acts[s]) for s in SETS]
    draw = CaptionDraw(SETS, vocab, [data[s].train.labels for s in SETS], prof.pretrain.name_rate,
                       prof.pretrain.hint_rate, spec.seed + 1, prof.pretrain.set_name_rates)
    torch.manual_seed(spec.seed)
    t0 = time.perf_counter()
    stats = pretrain_heads(model, name, features, draw, text, prof.pretrain)
    stats.update(seconds=time.perf_counter() - t0, activation_seconds=seconds_activations)
    write_openclip_dir(model.eval(), spec, path / "models" / name)
    return {"model": name, **stats}


def replay_activations(acts: dict, task: str, per_task: int, seed: int) -> torch.Tensor:
    """(R, C, h, w): `per_task` train activations of every other task (controls are never used), seeded."""
    g = torch.Generator().manual_seed(seed)
    return torch.cat([acts[t][torch.randperm(len(acts[t]), generator=g)[:per_task]]
                      for t in world_data.TASK_NAMES if t != task])


def job_sources(path: str, profile: str, seed: int, name: str, task: str, kinds=KINDS) -> dict:
    """The sources of `kinds` of (model, task); a kind's seed depends on its place in KINDS, not in `kinds`."""
    from ....models import load_model

    set_determinism(1)
    path, recipes = Path(path), source_recipes(profile, name)
    data = read_data(path)
    acts, _ = load_weights(path / "activations" / f"{name}.safetensors")
    encoder = load_model(f"open_clip:local-dir:{path / 'models' / name}")
    prompts = torch.nn.functional.normalize(encoder.encode_texts(list(data[task].task.prompts)), dim=-1)
    scale = encoder.model.logit_scale.detach().exp().item()
    spec, cut = model_spec(name, seed), cut_of(encoder.model.visual)
    out = {}
    for kind in kinds:
        recipe = recipes[kind]
        job_seed = spec.seed * 100 + world_data.TASK_NAMES.index(task) * 2 + KINDS.index(kind)
        replay = replay_activations(acts, task, recipe.replay_per_task, job_seed)
        t0 = time.perf_counter()
        state = train_source(encoder.model.visual, kind, acts[task], data[task].train.labels, prompts, scale, replay,
                             recipe, job_seed)
        seconds = time.perf_counter() - t0
        save_weights(path / "sources" / name / f"{task}.{kind}.safetensors", state,
                     {"kind": kind, "task": task, "base": f"world:trunk/{name}", "profile": profile, "seed": seed,
                      "recipe": asdict(recipe), "trained": cut.trained if kind == "full" else
                      f"LoRA on {', '.join(cut.lora_targets)} above the cut (merged)", "seconds": seconds})
        out[kind] = seconds
    return {"model": name, "task": task, **out}


# -- orchestration ----------------------------------------------------------------------------------

def write_inputs(path: Path, profile: str, seed: int, progress: bool = True) -> dict[str, float]:
    """data.safetensors (the image world's sets at the profile's sizes, the harder shapes and textures) and
    captions.safetensors (MiniLM features of the caption vocabulary, one thread). Returns each step's seconds."""
    from open_clip.tokenizer import HFTokenizer

    prof = check_profile(profile)
    timings = {}
    t0 = time.perf_counter()
    data = world_data.build_data(prof.sizes, seed, progress=progress, probes_per_class=prof.probes_per_class,
                                 variants=TASK_VARIANTS, train_fonts=prof.train_fonts,
                                 controls=CONTROL_NAMES)
    write_tensors(path / "data.safetensors", world_data.data_to_tensors(data), {"sizes": asdict(prof.sizes), "seed": seed,
                  "variants": TASK_VARIANTS}, key=META_KEY, make_parents=True)
    timings["data"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        spec = MODELS[MODEL_NAMES[0]]
        model = build_openclip_model(spec)
        text_cfg = spec.model_cfg()["text_cfg"]
        vocab = world_data.caption_vocabulary(CONTROL_NAMES)
        feats = caption_features(model, vocab, HFTokenizer(text_cfg["hf_tokenizer_name"], context_length=spec.context_length))
    finally:
        torch.set_num_threads(threads)
    save_weights(path / "captions.safetensors", {"features": feats}, {"vocab": vocab})
    timings["captions"] = time.perf_counter() - t0
    return timings


def pretrain_then_sources(pretrain, kinds: dict, args: tuple, workers: int, lines: LineProgress,
                          pretrained=()) -> tuple[dict, list[dict]]:
    """On `workers` worker processes: `pretrain(*args, name)` for every name of `kinds` (name -> source kinds) not in
    `pretrained`, and as each is done (at once for those in `pretrained`) the sources of its kinds on every task
    (`job_sources`). Returns (name -> pre-training result, [source results])."""
    pre_stats, src_stats = {}, []
    tasks = world_data.TASK_NAMES
    with worker_pool(workers) as pool:
        def sources_of(name):
            return {pool.submit(job_sources, *args, name, t, kinds[name]): ("src", (name, t))
                    for t in tasks if kinds[name]}

        pending = {}
        for name in kinds:
            pending.update(sources_of(name) if name in pretrained else {pool.submit(pretrain, *args, name): ("pre", name)})
        while pending:
            fut = next(as_completed(list(pending)))
            stage, what = pending.pop(fut)
            res = fut.result()
            if stage == "pre":
                pre_stats[what] = res
                lines.step(f"pre-trained {what}")
                pending.update(sources_of(what))
            else:
                src_stats.append(res)
                lines.step(f"sources {'/'.join(what)}")
    return pre_stats, src_stats


def ensure_sources(path: Path, kinds=KINDS, progress: bool = True, workers: int | None = None) -> Path:
    """Build the sources of `kinds` that the built trunk world at `path` lacks (its build.json names the profile and
    seed); returns `path`. The other kinds and the pre-trained models are left as they are."""
    path = require_built(path)
    kinds = check_kinds(kinds)
    have = built_kinds(path)
    missing = tuple(k for k in kinds if k not in have)
    if not missing:
        return path
    build = json.loads((path / "build.json").read_text())
    profile, seed = build["profile"], int(build["seed"])
    workers = build_workers(workers)
    lines = LineProgress(len(MODEL_NAMES) * len(world_data.TASK_NAMES),
                         f"trunk world ({profile}): {' and '.join(missing)} sources", enabled=progress)
    t0 = time.perf_counter()
    _, results = pretrain_then_sources(job_pretrain, {m: missing for m in MODEL_NAMES}, (str(path), profile, seed),
                                       workers, lines, pretrained=MODEL_NAMES)
    build["timings_s"][f"sources_{'_'.join(missing)}_later"] = time.perf_counter() - t0
    for r in results:
        build["finetune_seconds"].setdefault(f"{r['model']}/{r['task']}", {}).update({k: r[k] for k in missing})
    write_build_record(path, build, [k for k in KINDS if k in have or k in missing])
    return path


def build_trunk_world(profile: str = "full", seed: int = 0, root: Path | None = None, force: bool = False,
                      progress: bool = True, workers: int | None = None, kinds=("full",)) -> Path:
    """Build (or rebuild with `force`) the trunk world with the sources of `kinds`; returns its directory.
    A world already built with fewer kinds gets the missing ones added."""
    check_profile(profile)
    kinds = check_kinds(kinds)
    world_data.require_debian_data()
    path = trunk_world_dir(profile, seed, root)
    if built_kinds(path) and not force:
        return ensure_sources(path, kinds, progress=progress, workers=workers)
    if path.exists():
        shutil.rmtree(path)
    (path / "models").mkdir(parents=True)
    workers = build_workers(workers)
    t_all = time.perf_counter()
    total = len(MODEL_NAMES) * (1 + len(world_data.TASK_NAMES))
    lines = LineProgress(total, f"building trunk world ({profile})", enabled=progress)
    lines.note(f"started in {path}")
    timings = write_inputs(path, profile, seed, progress=progress)
    args = (str(path), profile, seed)
    t0 = time.perf_counter()
    pre_stats, src_stats = pretrain_then_sources(job_pretrain, {m: kinds for m in MODEL_NAMES}, args, workers, lines)
    timings["train"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_all
    build = {"profile": profile, "seed": seed, "world_version": TRUNK_WORLD_VERSION, "recipe": path.name, "workers": workers, "threads_per_worker": 1,
             "timings_s": timings, "pretrain": pre_stats, "versions": library_versions(), "cpu": cpu_record(),
             "sources": {k: asdict(v) for k, v in check_profile(profile).sources.items()}, "kinds": list(kinds),
             "finetune_seconds": {f"{r['model']}/{r['task']}": {k: r[k] for k in kinds} for r in src_stats}}
    write_build_record(path, build, kinds)
    lines.note("complete")
    return path


def ensure_trunk_world(profile: str | None = None, seed: int = 0, root: Path | None = None, progress: bool = True,
                       kinds=("full",)) -> Path:
    """The built trunk world's directory, building first what is missing of it (sources of `kinds`)."""
    profile = profile or default_profile()
    kinds = check_kinds(kinds)
    path = trunk_world_dir(profile, seed, root)
    if not set(kinds) <= set(built_kinds(path)):
        build_trunk_world(profile, seed=seed, root=root, progress=progress, kinds=kinds)
    return relocate_models(path)


def require_built(path: Path) -> Path:
    if not built_kinds(path):
        raise InvalidInputError(f"{path} is not a built trunk world (no COMPLETE marker); build it with "
                                "`platonic world trunk-build`")
    return relocate_models(Path(path))


def relocate_models(path: Path) -> Path:
    """The built world `path`, its models' open_clip configs re-pointed at this installation's MiniLM and timm config
    folders where the folders they name are gone (`relocate_openclip_dir`: a world cached by another virtual
    environment or checkout)."""
    models = path / "models"
    for directory in sorted(models.iterdir()) if models.is_dir() else ():
        relocate_openclip_dir(directory)
    return path
