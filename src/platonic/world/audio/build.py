"""Build the audio world: data, caption cache, pre-training of the audio zoo, fine-tuned sources. Cached, versioned.

Like the image world's builder (`platonic.world.image.build`) it makes data and weights only; what the world
does (zero-shot, fine-tuning gain, descriptor agreement, oracle recovery) is measured by the experiment
engine, `platonic.experiments.checks`, which writes report.json / report.md into the same
directory.

Layout under $CACHE/audio-world/ ($CACHE: $PLATONIC_CACHE, else $XDG_CACHE_HOME/platonic, else ~/.cache/platonic):

    data-{profile}-seed{seed}-{data hash}.safetensors     the rendered clips (int16), splits, probe indices;
                                                          shared by every recipe with the same data
    audio-world-v{VERSION}-{profile}-seed{seed}-{recipe}/
        captions.safetensors      MiniLM embeddings (V, 384) of the caption vocabulary (JSON list in metadata)
        models/NAME/base.safetensors                  pre-trained model (audio tower, text head, logit head)
        models/NAME/ft/TASK.{full,lora}.safetensors   fine-tuned audio towers (base parameter names)
        build.json                timings, pre-training statistics, fine-tune settings, library versions and CPU
        COMPLETE                  written last, naming the source kinds built; a directory without it is rebuilt

The data hash covers the data version, sizes, seed, probes and tasks (`data_record`); the recipe hash
covers that, the recipe version, the profile and the model specs (`recipe_record`): declared objects,
no source file, so moving code rebuilds nothing (tests/audio_zoo pins the tiny audio world's weights).
Jobs (pre-train one model; fine-tune one (model, task) for the kinds asked) run in single-threaded worker
processes, each seeded by itself, so the weights do not depend on the number of workers. As in the image worlds,
a build makes the full sources the experiments use by default, and the LoRA sources on first use
(`ensure_audio_world(kinds=...)`, `ensure_audio_sources`; the report and `world:audio/NAME/TASK/lora` ask for them).
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

from ...data.probes import PROBES_PER_CLASS
from ...environment import cpu_record, library_versions
from ...errors import ArtifactError, InvalidInputError
from ...finetuning import FinetuneConfig, finetune
from ...paths import cache_root
from ...progress import LineProgress, track
from ...storage import atomic_write
from ..common.captions import write_caption_embeddings
from ..common.jobs import build_workers, model_seed, set_determinism, worker_pool, world_inputs, write_build_record
from ..common.kinds import KINDS, add_sources, built_kinds, check_kinds
from . import dataset
from .dataset import AudioDataSizes
from .pretrain import AudioPretrainConfig, pretrain
from .tasks import TASK_NAMES, all_sets, caption_vocabulary
from .tools import require_audio_packages
from .zoo import MODEL_NAMES, SPECS
from .zoo import load_weights as _load_weights
from .zoo import model_from_state, save_weights, spec_to_json

AUDIO_WORLD_VERSION = 1
# The versions of the code that renders the clips and of the code that trains the audio world (nets,
# pre-training, the fine-tuning loop): bump with any change of what they make. Named after the last keys
# read from module files, whose data and weights these are.
AUDIO_DATA_VERSION = "audio-data-1"
RECIPE_VERSION = "0eac2fae980c"
META_KEY = "platonic_world"


@dataclass(frozen=True)
class AudioProfile:
    """One build recipe: data sizes, pre-training, and the `platonic.finetuning.finetune` config of each source kind.

    sources["full"]: every audio-tower parameter; sources["lora"]: peft LoRA (full profile rank 8 / alpha 16)
    on the spec's targets, merged. Both with the replay term over `replay_per_task` train clips of every other task.
    """

    name: str
    sizes: AudioDataSizes
    pretrain: AudioPretrainConfig
    sources: dict
    replay_per_task: int = 64
    probes_per_class: int = PROBES_PER_CLASS  # 30 as in the paper; the tiny test profile uses fewer


def _sources(steps: int, batch: int, lr: float, lora_lr: float, replay_batch: int, lora_rank: int = 4) -> dict[str, FinetuneConfig]:
    """Full and LoRA source fine-tunes: warm-up 10 % then cosine, the model's own logit scale, replay 3;
    LoRA alpha = 2 x rank."""
    common = dict(steps=steps, batch_size=batch, warmup_fraction=0.1, logit_scale=None, replay=3.0,
                  replay_batch_size=replay_batch)
    return {"full": FinetuneConfig(mode="full", lr=lr, weight_decay=0.1, **common),
            "lora": FinetuneConfig(mode="lora", lr=lora_lr, weight_decay=0.01, lora_rank=lora_rank,
                                   lora_alpha=2 * lora_rank, **common)}


PROFILES = {
    # tests: every model, task, source kind and report cell, as small as the renderers and splits allow
    "tiny": AudioProfile("tiny", AudioDataSizes(6, 1, 2, 2, 1, 2), AudioPretrainConfig(steps=8, batch=16, lr=2e-3),
                         _sources(steps=2, batch=8, lr=3e-4, lora_lr=3e-3, replay_batch=4), replay_per_task=2,
                         probes_per_class=2),
    "full": AudioProfile("full", dataset.SIZES["full"], AudioPretrainConfig(steps=200, batch=128, lr=2e-3),
                         # recipe v2: 120 steps (was 40) at lr 3e-3 (1e-3); LoRA rank 8 (4) at 3e-2 (1e-2); measured
                         # on cells of the v1 bases (docs/lab/2026-12-02-audio-world-recipes-v1-v2.md)
                         _sources(steps=120, batch=32, lr=3e-3, lora_lr=3e-2, replay_batch=16, lora_rank=8),
                         replay_per_task=32),
}
def check_profile(profile: str) -> str:
    """`profile` if it is a known audio world profile; else raise naming the known ones."""
    if profile not in PROFILES:
        raise InvalidInputError(f"unknown audio world profile {profile!r}; use one of {', '.join(PROFILES)}")
    return profile


def data_record(profile: AudioProfile, seed: int) -> dict:
    """What determines the rendered clips, declared: the data version, sizes, seed, probes per class, the tasks."""
    return {"data": AUDIO_DATA_VERSION, "sizes": asdict(profile.sizes), "seed": seed, "probes": profile.probes_per_class,
            "tasks": {name: asdict(task) for name, task in all_sets().items()}}


def data_hash(profile: AudioProfile, seed: int) -> str:
    """The rendered data's key: sha256 of `data_record` (12 hex digits)."""
    return _digest(data_record(profile, seed))


def recipe_record(profile: AudioProfile, seed: int) -> dict:
    """What determines the built weights, declared: the versions, the data's key, seed, pre-training, replay,
    every source's `FinetuneConfig` and the model specs. No source file is read (`RECIPE_VERSION`)."""
    return {"version": AUDIO_WORLD_VERSION, "recipe": RECIPE_VERSION, "data": data_hash(profile, seed), "seed": seed,
            "pretrain": asdict(profile.pretrain), "replay_per_task": profile.replay_per_task,
            "sources": {k: c.model_dump() for k, c in profile.sources.items()},
            "specs": {n: spec_to_json(s) for n, s in SPECS.items()}}


def recipe_hash(profile: AudioProfile, seed: int) -> str:
    """The build directory's key: sha256 of `recipe_record` (12 hex digits)."""
    return _digest(recipe_record(profile, seed))


def _digest(record: dict) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _root(root: Path | None) -> Path:
    return Path(root) if root is not None else cache_root() / "audio-world"


def data_path(profile: str = "full", seed: int = 0, root: Path | None = None) -> Path:
    prof = PROFILES[check_profile(profile)]
    return _root(root) / f"data-{profile}-seed{seed}-{data_hash(prof, seed)}.safetensors"


def audio_world_dir(profile: str = "full", seed: int = 0, root: Path | None = None) -> Path:
    prof = PROFILES[check_profile(profile)]
    return _root(root) / f"audio-world-v{AUDIO_WORLD_VERSION}-{profile}-seed{seed}-{recipe_hash(prof, seed)}"


def default_profile() -> str:
    p = os.environ.get("PLATONIC_WORLD_PROFILE", "full")
    if p not in PROFILES:
        raise InvalidInputError(f"PLATONIC_WORLD_PROFILE={p!r}; use one of {', '.join(PROFILES)}")
    return p


def ensure_audio_world(profile: str | None = None, seed: int = 0, root: Path | None = None, progress: bool = True,
                       kinds=("full",)) -> Path:
    """The built audio world's directory, building first what is missing of it: the data, the pre-trained models
    and the sources of `kinds` ("full", the experiments' default; "lora")."""
    profile = profile or default_profile()
    kinds = check_kinds(kinds)
    path = audio_world_dir(profile, seed, root)
    if not set(kinds) <= set(built_kinds(path)):
        build_audio_world(profile, seed=seed, root=root, progress=progress, kinds=kinds)
    return path


def ensure_audio_sources(path: Path, kinds=KINDS, progress: bool = True, workers: int | None = None) -> Path:
    """Build the sources of `kinds` that the built audio world at `path` lacks; returns `path`. The other kind and
    the pre-trained models are left as they are."""
    pairs = [(m, t) for m in MODEL_NAMES for t in TASK_NAMES]
    return add_sources(path, kinds, job_finetune, pairs, "audio world", "platonic world audio-build", progress=progress,
                       workers=workers)


def ensure_audio_data(profile: str = "full", seed: int = 0, root: Path | None = None, progress: bool = True) -> Path:
    """The rendered data file of `profile`, rendering it first if missing."""
    path = data_path(profile, seed, root)
    if not path.exists():
        prof = PROFILES[profile]
        data = dataset.build_audio_data(prof.sizes, seed, progress=progress, probes_per_class=prof.probes_per_class)
        dataset.save_audio_data(path, data, {"profile": profile, "seed": seed})
    return path


def load_weights(path) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, JSON metadata) of a weights file of the audio world (the image world's format); a missing
    file names the audio build."""
    if not Path(path).exists():
        raise ArtifactError(f"{path} does not exist; build the audio world with `platonic world audio-build`")
    return _load_weights(path)


# -- worker side ------------------------------------------------------------------------------------

def world_data_file(world: Path) -> Path:
    """The data file a built audio world reads (named in its build.json, or beside it while it builds)."""
    return Path(json.loads((Path(world) / "inputs.json").read_text())["data"])


def load_world_inputs(world: Path):
    """(data, vocab, caption_emb) of an audio world directory, read once per process."""
    return world_inputs(world, lambda path: dataset.load_audio_data(world_data_file(path)))


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
    """Canonical clips (R, 16000): `per_task` train clips of every other task (controls are never used)."""
    g = torch.Generator().manual_seed(seed)
    parts = []
    for t in TASK_NAMES:
        if t != task:
            train = data[t].train
            parts.append(train.clips[torch.randperm(len(train), generator=g)[:per_task]])
    return torch.cat(parts)


def job_finetune(path: str, profile: str, seed: int, name: str, task: str, kinds=KINDS) -> dict:
    """The sources of `kinds` of (model, task), each a `platonic.finetuning.finetune` run; writes the towers' weights.
    A kind's seed depends on its place in KINDS, not in `kinds`: built apart or together, the same weights."""
    set_determinism(1)
    path = Path(path)
    data, _, _ = load_world_inputs(path)
    spec = SPECS[name]
    state, _ = load_weights(path / "models" / name / "base.safetensors")
    model = model_from_state(spec, state, f"world:audio/{name}")
    prof = PROFILES[profile]
    train = data[task].train
    replay = replay_pool(data, task, prof.replay_per_task, model_seed(spec, seed))
    out = {}
    for kind in kinds:
        k = KINDS.index(kind)
        t0 = time.perf_counter()
        config = prof.sources[kind].model_copy(update={"seed": model_seed(spec, seed) * 100 + TASK_NAMES.index(task) * 2 + k})
        tuned, losses = finetune(model, train.clips, train.labels, data[task].task.prompts, config, progress=False,
                                 replay_inputs=replay)
        secs = time.perf_counter() - t0
        prov = {"kind": kind, "task": task, "base": f"world:audio/{name}", "profile": profile, "seed": seed,
                "finetune": config.model_dump(), "lora_targets": list(spec.lora_targets) if kind == "lora" else None,
                "trained": "audio tower, all parameters" if kind == "full" else "LoRA adapters (merged)",
                "final_loss": sum(losses[-8:]) / len(losses[-8:]), "seconds": secs}
        save_weights(path / "models" / name / "ft" / f"{task}.{kind}.safetensors", tuned.tower.state_dict(), prov)
        out[kind] = secs
    return {"model": name, "task": task, **out}


# -- orchestration ------------------------------------------------------------------------------------

def build_audio_world(profile: str = "full", seed: int = 0, root: Path | None = None, force: bool = False,
                      progress: bool = True, workers: int | None = None, kinds=KINDS) -> Path:
    """Build (or rebuild with `force`) the audio world with the sources of `kinds`; returns its directory.

    A world already built with fewer kinds gets the missing ones added (`ensure_audio_sources`). Renders the data
    first when its file is missing (MissingDataError naming the Debian package when a program, soundfont or voice
    is missing).
    """
    check_profile(profile)
    kinds = check_kinds(kinds)
    require_audio_packages()
    path = audio_world_dir(profile, seed, root)
    if built_kinds(path) and not force:
        return ensure_audio_sources(path, kinds, progress=progress, workers=workers)
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    workers = build_workers(workers)
    prof = PROFILES[profile]
    timings = {}
    t_all = time.perf_counter()
    total = len(MODEL_NAMES) * (1 + len(TASK_NAMES))
    lines = LineProgress(total, f"building audio world ({profile})", enabled=progress)
    lines.note(f"started in {path}")

    t0 = time.perf_counter()
    data_file = ensure_audio_data(profile, seed, root, progress=progress and not lines.active)
    atomic_write(path / "inputs.json", lambda tmp: Path(tmp).write_text(json.dumps({"data": str(data_file)})))
    timings["data"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    vocab = caption_vocabulary()
    write_caption_embeddings(path, vocab, META_KEY)
    timings["captions"] = time.perf_counter() - t0
    lines.note(f"data and caption embeddings ready ({len(vocab)} captions); {total} training jobs next")

    args = (str(path), profile, seed)
    pre_stats, ft_stats = {}, []
    t0 = time.perf_counter()
    with worker_pool(workers) as pool:
        pending = {pool.submit(job_pretrain, *args, m): ("pre", m) for m in MODEL_NAMES}
        bar = iter(track(range(total), description=f"building audio world ({profile})", enabled=progress and not lines.active))
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
    build = {"profile": profile, "seed": seed, "world_version": AUDIO_WORLD_VERSION, "recipe": path.name, "workers": workers,
             "threads_per_worker": 1, "timings_s": timings, "pretrain": pre_stats,
             "versions": library_versions(), "cpu": cpu_record(), "data": str(data_file),
             "sources": {kind: cfg.model_dump() for kind, cfg in prof.sources.items()}, "kinds": list(kinds),
             "finetune_seconds": {f"{r['model']}/{r['task']}": {k: r[k] for k in kinds} for r in ft_stats}}
    write_build_record(path, build, kinds)
    lines.note("complete")
    return path
