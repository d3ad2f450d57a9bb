"""Build the world: data, caption cache, pre-training, fine-tuned sources. Cached, versioned.

The builder makes data and weights only; what the world does (accuracies, descriptor agreement, the
oracle, the acceptance checks) is measured by the experiment engine, `platonic.experiments.checks`,
which writes report.json / report.md into the same directory.

Layout of a built world (one directory per version x profile x seed x recipe hash):

    $CACHE/world/world-v{VERSION}-{profile}-seed{seed}-{recipe}/
        data.safetensors          every split of every task and control (uint8) + probe indices
        captions.safetensors      MiniLM embeddings (V, 384) of the caption vocabulary (JSON list in metadata)
        models/NAME/base.safetensors            pre-trained model (image tower, text head, logit head)
        models/NAME/ft/TASK.{full,lora}.safetensors   fine-tuned image towers (base parameter names), or dtheta
                                  for a profile whose sources fine-tune in the tangent space (mode "linear")
        build.json                timings, pre-training statistics, fine-tune settings, library versions and CPU
        COMPLETE                  written last, naming the source kinds built; a directory without it is rebuilt
        report.json, report.md    written by platonic.experiments.checks (not part of the build)

$CACHE is $PLATONIC_CACHE, else $XDG_CACHE_HOME/platonic, else ~/.cache/platonic. The recipe hash
covers the recipe's declared objects (`recipe_record`: versions, profile, seed, model specs, tasks), not
source files, so moving or documenting code rebuilds nothing; a change of what a build trains bumps
`RECIPE_VERSION`. Work runs in a pool of single-threaded worker processes started by a fork server (each job seeded on its
own, so results do not depend on the number of workers).

Source kinds are built on demand: `ensure_world()` (the demo, the experiments, `world:NAME/TASK`) builds
the full sources only; the LoRA sources follow the first time something asks for them (the report,
`world:NAME/TASK/lora`, `source_kind="lora"`), with the same seeds, so a world built in two steps holds
the same weights as one built at once (`platonic world build` builds both).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from ...environment import cpu_record, library_versions
from ...errors import InvalidInputError
from ...finetuning import FinetuneConfig, finetune
from ...paths import cache_root
from ...progress import LineProgress, track
from ...storage import write_tensors
from ..common.captions import write_caption_embeddings
from ..common.jobs import build_workers, model_seed, set_determinism, worker_pool, world_inputs, write_build_record
from ..common.kinds import KINDS, add_sources, built_kinds, check_kinds
from . import data as world_data
from . import zoo
from .data import TASK_NAMES, DataSizes
from .train import PretrainConfig, pretrain
from ..common.weights import META_KEY, load_weights, save_weights
from .zoo import MODEL_NAMES, SPECS, model_from_state, spec_to_json

WORLD_VERSION = 1
# The version of the code that trains a world (data rendering, nets, pre-training, the fine-tuning loop).
# Bump it with any change that alters the weights a build makes; named after the last key that was read
# from module files, whose weights these are (recipe 089d829ab416).
RECIPE_VERSION = "089d829ab416"


@dataclass(frozen=True)
class Profile:
    """One build recipe: data sizes, pre-training, and the fine-tune of each source kind.

    sources[kind] is the `platonic.finetuning.finetune` configuration of that kind's sources ("full": every tower
    parameter; "lora": rank 4 / alpha 8 on the spec's LoRA targets, merged), each with the replay term
    over `replay_per_task` train images of every other task.
    """

    name: str
    sizes: DataSizes
    pretrain: PretrainConfig
    sources: dict
    replay_per_task: int = 64
    probes_per_class: int = world_data.PROBES_PER_CLASS  # 30 as in the paper; the tiny test profile uses fewer


def _sources(steps: int, batch: int, lr: float, lora_lr: float) -> dict[str, FinetuneConfig]:
    """Full and LoRA source fine-tunes: warm-up 10 % then cosine, the model's own logit scale, replay 3.

    Not CLIP's 100 (`FinetuneConfig`'s default): at 100 the fine-tunes learn more and their oracle operators
    are more local, but what they change stops agreeing across models (same-task descriptor cosine 0.60 ->
    0.39, fashion 0.88 -> 0.08) and cross-model transfer falls (docs/lab/2026-12-03-logit-scale-100.md).
    Not tangent-space full sources (mode "linear", which `job_finetune` stores as dtheta and the backend
    loads as a `LinearizedEncoder`): at scale 30 they made the oracle local on four models of six but the
    glyph tasks' descriptors stopped agreeing (same-task cosine 0.29 vs cross-task 0.24), and the build
    took 41 minutes (docs/lab/2026-12-03-tangent-sources-world.md)."""
    common = dict(steps=steps, batch_size=batch, warmup_fraction=0.1, logit_scale=None, replay=3.0, replay_batch_size=32)
    return {"full": FinetuneConfig(mode="full", lr=lr, weight_decay=0.1, **common),
            "lora": FinetuneConfig(mode="lora", lr=lora_lr, weight_decay=0.01, lora_rank=4, lora_alpha=8, **common)}


PROFILES = {
    "tiny": Profile("tiny", DataSizes(40, 10, 20, 1, 1, 5, max_fonts=8, icon_variants_train=2, icon_variants_eval=1),
                    PretrainConfig(steps=30, batch=64, lr=2e-3), _sources(steps=4, batch=32, lr=3e-4, lora_lr=3e-3),
                    probes_per_class=4),
    "full": Profile("full", DataSizes(400, 30, 80, 2, 1, 20), PretrainConfig(steps=550, batch=128, lr=2e-3),
                    _sources(steps=128, batch=64, lr=1e-3, lora_lr=1e-2)),
}
# What a source file holds: "tower" (the fine-tuned image tower's state dict, base parameter names) or
# TANGENT_WEIGHTS (dtheta of a tangent fine-tune, keyed by the model's parameter names), in its "weights" field.
TANGENT_WEIGHTS = "dtheta"
TRAINED = {"full": "image tower, all parameters", "lora": "LoRA adapters (merged)", "attention": "image tower, attention",
           "linear": "image tower, all parameters, in its tangent space around the pre-trained weights"}


def recipe_record(profile: Profile, seed: int) -> dict:
    """What determines the built weights, declared: the world's and the recipe's versions, the profile
    (data sizes, pre-training, every source's `FinetuneConfig`), the seed, the model specs and the tasks
    (classes, templates, caption hints). No source file is read: code that changes what a build trains
    bumps `RECIPE_VERSION` (tests/world/test_world_recipe.py pins the tiny world's weights, so a change
    that moves them without a bump fails there)."""
    return {"version": WORLD_VERSION, "recipe": RECIPE_VERSION, "profile": _profile_json(profile), "seed": seed,
            "specs": {name: zoo.spec_to_json(spec) for name, spec in zoo.SPECS.items()},
            "tasks": {name: asdict(task) for name, task in world_data.all_sets().items()}}


def recipe_hash(profile: Profile, seed: int) -> str:
    """The build directory's key: sha256 of `recipe_record` (12 hex digits)."""
    return hashlib.sha256(json.dumps(recipe_record(profile, seed), sort_keys=True, default=str).encode()).hexdigest()[:12]


def _profile_json(profile: Profile) -> dict:
    out = {k: v for k, v in asdict(profile).items() if k != "sources"}
    out["sources"] = {kind: cfg.model_dump() for kind, cfg in profile.sources.items()}
    return out


def check_profile(profile: str) -> str:
    """`profile` if it is a known world profile; else raise naming the known ones."""
    if profile not in PROFILES:
        raise InvalidInputError(f"unknown world profile {profile!r}; use one of {', '.join(PROFILES)}")
    return profile


def world_dir(profile: str = "full", seed: int = 0, root: Path | None = None) -> Path:
    prof = PROFILES[check_profile(profile)]
    base = Path(root) if root is not None else cache_root() / "world"
    return base / f"world-v{WORLD_VERSION}-{profile}-seed{seed}-{recipe_hash(prof, seed)}"


def default_profile() -> str:
    p = os.environ.get("PLATONIC_WORLD_PROFILE", "full")
    if p not in PROFILES:
        raise InvalidInputError(f"PLATONIC_WORLD_PROFILE={p!r}; use one of {', '.join(PROFILES)}")
    return p


def ensure_world(profile: str | None = None, seed: int = 0, root: Path | None = None, progress: bool = True,
                 kinds=("full",)) -> Path:
    """The built world's directory, building first what is missing of it: the data, the pre-trained
    models and the sources of `kinds` ("full", the demo's and the experiments' default; "lora")."""
    profile = profile or default_profile()
    kinds = check_kinds(kinds)
    path = world_dir(profile, seed, root)
    if not set(kinds) <= set(built_kinds(path)):
        build_world(profile, seed=seed, root=root, progress=progress, kinds=kinds)
    return path


def ensure_sources(path: Path, kinds=KINDS, progress: bool = True, workers: int | None = None) -> Path:
    """Build the sources of `kinds` that the built world at `path` lacks (its build.json names the
    profile and seed); returns `path`. The other kinds and the pre-trained models are left as they are."""
    pairs = [(m, t) for m in MODEL_NAMES for t in TASK_NAMES]
    return add_sources(path, kinds, job_finetune, pairs, "world", "platonic world build", progress=progress, workers=workers)


# -- worker side ----------------------------------------------------------------------------------

def load_world_inputs(path: Path):
    """(data, vocab, caption_emb) of a world directory, read once per process."""
    return world_inputs(path, _read_data)


def _read_data(path: Path) -> dict:
    with safe_open(str(path / "data.safetensors"), framework="pt") as f:
        return world_data.data_from_tensors({k: f.get_tensor(k) for k in f.keys()})


def job_pretrain(path: str, profile: str, seed: int, name: str) -> dict:
    set_determinism(1)
    path = Path(path)
    data, vocab, emb = load_world_inputs(path)
    spec = SPECS[name]
    t0 = time.perf_counter()
    module, stats = pretrain(spec, data, vocab, emb, PROFILES[profile].pretrain, model_seed(spec, seed))
    stats["seconds"] = time.perf_counter() - t0
    save_weights(path / "models" / name / "base.safetensors", module.state_dict(),
                 {"spec": spec_to_json(spec), "provenance": {"kind": "pretrained", "profile": profile, "seed": seed, **stats}})
    return {"model": name, **stats}


def replay_pool(data, task: str, per_task: int, seed: int) -> torch.Tensor:
    """uint8 images (R, 3, S, S): `per_task` train images of every other task (controls are never used)."""
    g = torch.Generator().manual_seed(seed)
    parts = [data[t].train.images[torch.randperm(len(data[t].train), generator=g)[:per_task]] for t in TASK_NAMES if t != task]
    return torch.cat(parts)


def job_finetune(path: str, profile: str, seed: int, name: str, task: str, kinds=KINDS) -> dict:
    """The sources of `kinds` of (model, task), each a `platonic.finetuning.finetune` run; writes the towers' weights.
    A kind's seed depends on its place in KINDS, not in `kinds`: built apart or together, the same weights."""
    set_determinism(1)
    path = Path(path)
    data, _, _ = load_world_inputs(path)
    spec = SPECS[name]
    state, _ = load_weights(path / "models" / name / "base.safetensors")
    model = model_from_state(spec, state, f"world:{name}")
    prof = PROFILES[profile]
    train = data[task].train
    replay = replay_pool(data, task, prof.replay_per_task, model_seed(spec, seed))
    out = {}
    for kind in kinds:
        k = KINDS.index(kind)
        t0 = time.perf_counter()
        config = prof.sources[kind].model_copy(update={"seed": model_seed(spec, seed) * 100 + TASK_NAMES.index(task) * 2 + k})
        tuned, losses = finetune(model, train.images, train.labels, data[task].task.prompts, config, progress=False,
                                 replay_inputs=replay)
        secs = time.perf_counter() - t0
        tangent = config.mode == "linear"
        prov = {"kind": kind, "task": task, "base": f"world:{name}", "profile": profile, "seed": seed,
                "finetune": config.model_dump(), "lora_targets": list(spec.lora_targets) if kind == "lora" else None,
                "trained": TRAINED[config.mode], "weights": TANGENT_WEIGHTS if tangent else "tower",
                "final_loss": sum(losses[-8:]) / len(losses[-8:]), "seconds": secs}
        weights = tuned.delta if tangent else tuned.tower.state_dict()
        save_weights(path / "models" / name / "ft" / f"{task}.{kind}.safetensors", weights, prov)
        out[kind] = secs
    return {"model": name, "task": task, **out}


# -- orchestration ----------------------------------------------------------------------------------

def write_world_inputs(path: Path, profile: str, seed: int, progress: bool = True) -> dict[str, float]:
    """Write what every job reads: data.safetensors (every split, probe indices) and captions.safetensors
    (the MiniLM embeddings of the caption vocabulary). Returns the seconds of each step ("data", "captions")."""
    prof = PROFILES[check_profile(profile)]
    timings = {}
    t0 = time.perf_counter()
    data = world_data.build_data(prof.sizes, seed, progress=progress, probes_per_class=prof.probes_per_class)
    write_tensors(path / "data.safetensors", world_data.data_to_tensors(data), {"sizes": asdict(prof.sizes), "seed": seed}, key=META_KEY, make_parents=True)
    timings["data"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    write_caption_embeddings(path, world_data.caption_vocabulary(), META_KEY)
    timings["captions"] = time.perf_counter() - t0
    return timings


def build_world(profile: str = "full", seed: int = 0, root: Path | None = None, force: bool = False, progress: bool = True,
                workers: int | None = None, kinds=KINDS) -> Path:
    """Build (or rebuild with `force`) the world with the sources of `kinds`; returns its directory.

    A world already built with fewer kinds gets the missing ones added (`ensure_sources`)."""
    check_profile(profile)
    kinds = check_kinds(kinds)
    world_data.require_debian_data()
    path = world_dir(profile, seed, root)
    if built_kinds(path) and not force:
        return ensure_sources(path, kinds, progress=progress, workers=workers)
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    workers = build_workers(workers)
    prof = PROFILES[profile]
    timings = {}
    t_all = time.perf_counter()

    total = len(MODEL_NAMES) * (1 + len(TASK_NAMES))
    lines = LineProgress(total, f"building world ({profile})", enabled=progress)  # logs: one line per job
    lines.note(f"started in {path}")
    timings.update(write_world_inputs(path, profile, seed, progress=progress))
    lines.note(f"data and caption embeddings ready; {total} training jobs next")

    args = (str(path), profile, seed)
    pre_stats, ft_stats = {}, []
    t0 = time.perf_counter()
    with worker_pool(workers) as pool:
        futures = {pool.submit(job_pretrain, *args, m): ("pre", m) for m in MODEL_NAMES}
        pending = dict(futures)
        bar = iter(track(range(total), description=f"building world ({profile})", enabled=progress and not lines.active))
        while pending:
            for fut in as_completed(list(pending)):
                stage, m = pending.pop(fut)
                res = fut.result()
                next(bar, None)
                lines.step(f"pre-training {m}" if stage == "pre" else f"fine-tuning {'/'.join(m)}")
                if stage == "pre":
                    pre_stats[m] = res
                    for t in TASK_NAMES:
                        pending[pool.submit(job_finetune, *args, m, t, kinds)] = ("ft", (m, t))
                else:
                    ft_stats.append(res)
                break
        for _ in bar:
            pass
    timings["train"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_all
    build = {"profile": profile, "seed": seed, "world_version": WORLD_VERSION, "recipe": path.name, "workers": workers,
             "threads_per_worker": 1, "timings_s": timings, "pretrain": pre_stats,
             "versions": library_versions(), "cpu": cpu_record(),
             "sources": {kind: cfg.model_dump() for kind, cfg in prof.sources.items()}, "kinds": list(kinds),
             "finetune_seconds": {f"{r['model']}/{r['task']}": {k: r[k] for k in kinds} for r in ft_stats}}
    write_build_record(path, build, kinds)
    lines.note("complete")
    return path
