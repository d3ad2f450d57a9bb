"""Build the world: data, caption cache, pre-training, fine-tuning, evaluation, report. Cached, versioned.

Layout of a built world (one directory per version x profile x seed x recipe hash):

    $CACHE/world/world-v{VERSION}-{profile}-seed{seed}-{recipe}/
        data.safetensors          every split of every task and control (uint8) + probe indices
        captions.safetensors      MiniLM embeddings (V, 384) of the caption vocabulary (JSON list in metadata)
        models/NAME/base.safetensors            pre-trained model (image tower, text head, logit head)
        models/NAME/ft/TASK.{full,lora}.safetensors   fine-tuned image towers (base parameter names)
        views/NAME.safetensors    cached embeddings used by the measurements
        report.json, report.md    accuracies, descriptor agreement, oracle recovery, timings
        COMPLETE                  written last; a directory without it is rebuilt

$CACHE is $PLATONIC_CACHE, else $XDG_CACHE_HOME/platonic, else ~/.cache/platonic. The recipe hash
covers the profile's settings and the source of the modules that define the world (data, nets,
zoo, train, text), so a change of recipe rebuilds. Work runs in a pool of forked single-threaded worker
processes (each job seeded on its own, so results do not depend on the number of workers).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ..errors import InvalidInputError
from ..paths import cache_root
from ..progress import LineProgress, track
from ..storage import atomic_write
from . import data as world_data
from .data import CONTROL_NAMES, TASK_NAMES, DataSizes
from .train import TrainConfig

WORLD_VERSION = 1


@dataclass(frozen=True)
class Profile:
    name: str
    sizes: DataSizes
    train: TrainConfig
    probes_per_class: int = world_data.PROBES_PER_CLASS  # 30 as in the paper; the tiny test profile uses fewer


PROFILES = {
    "tiny": Profile("tiny", DataSizes(40, 10, 20, 1, 1, 5, max_fonts=8),
                    TrainConfig(pretrain_steps=30, pretrain_batch=64, pretrain_lr=2e-3, ft_steps=4, ft_batch=32, ft_lr=3e-4, lora_lr=3e-3, ft_keep=3.0),
                    probes_per_class=4),
    "full": Profile("full", DataSizes(400, 30, 80, 2, 1, 20),
                    TrainConfig(pretrain_steps=550, pretrain_batch=128, pretrain_lr=2e-3, ft_steps=128, ft_batch=64, ft_lr=1e-3, lora_lr=1e-2, ft_keep=3.0)),
}
KINDS = ("full", "lora")
_RECIPE_MODULES = ("data.py", "nets.py", "train.py", "text.py")


def recipe_hash(profile: Profile, seed: int) -> str:
    """Hash of what determines the built weights: profile, seed, the recipe modules' source, and of
    zoo.py only the model specs and the module that is trained (not the DualEncoder wrapper, whose
    edits change no weight)."""
    import inspect

    from . import zoo

    h = hashlib.sha256()
    h.update(json.dumps({"version": WORLD_VERSION, "profile": asdict(profile), "seed": seed}, sort_keys=True, default=str).encode())
    here = Path(__file__).parent
    for name in _RECIPE_MODULES:
        h.update((here / name).read_bytes())
    h.update(json.dumps({name: zoo.spec_to_json(spec) for name, spec in zoo.SPECS.items()}, sort_keys=True).encode())
    for obj in (zoo.WorldDualEncoder, zoo.build_module):
        h.update(inspect.getsource(obj).encode())
    return h.hexdigest()[:12]


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


def ensure_world(profile: str | None = None, seed: int = 0, root: Path | None = None, progress: bool = True) -> Path:
    """The built world's directory, building it first if it is missing or incomplete."""
    profile = profile or default_profile()
    path = world_dir(profile, seed, root)
    if not (path / "COMPLETE").exists():
        build_world(profile, seed=seed, root=root, progress=progress)
    return path


# -- worker side ----------------------------------------------------------------------------------

_CACHE: dict = {}


def _save_tensors(path: Path, tensors: dict, meta: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
    atomic_write(path, lambda tmp: save_file(payload, tmp, metadata={"platonic_world": json.dumps(meta, sort_keys=True)}))


def _load_world_inputs(path: Path):
    """(data, vocab, caption_emb) of a world directory, cached per process."""
    key = str(path)
    if key not in _CACHE:
        with safe_open(str(path / "data.safetensors"), framework="pt") as f:
            data = world_data.data_from_tensors({k: f.get_tensor(k) for k in f.keys()})
        with safe_open(str(path / "captions.safetensors"), framework="pt") as f:
            vocab = json.loads(f.metadata()["platonic_world"])["vocab"]
            emb = f.get_tensor("embeddings")
        from .text import SentenceEncoder

        SentenceEncoder.shared().preload(vocab, emb)
        _CACHE.clear()
        _CACHE[key] = (data, vocab, emb)
    return _CACHE[key]


def _model_seed(spec, seed: int) -> int:
    return spec.seed + 1000 * seed


def job_pretrain(path: str, profile: str, seed: int, name: str) -> dict:
    from .train import pretrain, set_determinism
    from .zoo import SPECS, save_weights, spec_to_json

    set_determinism(1)
    path = Path(path)
    data, vocab, emb = _load_world_inputs(path)
    spec = SPECS[name]
    t0 = time.perf_counter()
    module, stats = pretrain(spec, data, vocab, emb, PROFILES[profile].train, _model_seed(spec, seed))
    stats["seconds"] = time.perf_counter() - t0
    save_weights(path / "models" / name / "base.safetensors", module.state_dict(),
                 {"spec": spec_to_json(spec), "provenance": {"kind": "pretrained", "profile": profile, "seed": seed, **stats}})
    return {"model": name, **stats}


def job_finetune(path: str, profile: str, seed: int, name: str, task: str) -> dict:
    from .train import finetune, replay_pool, set_determinism
    from .zoo import SPECS, load_weights, model_from_state, save_weights

    set_determinism(1)
    path = Path(path)
    data, vocab, emb = _load_world_inputs(path)
    spec = SPECS[name]
    state, _ = load_weights(path / "models" / name / "base.safetensors")
    model = model_from_state(spec, state)
    index = {c: i for i, c in enumerate(vocab)}
    prompts = data[task].task.prompts
    prompt_emb = emb[[index[p] for p in prompts]]
    out = {}
    cfg = PROFILES[profile].train
    replay = replay_pool(data, task, cfg.ft_replay_per_task, _model_seed(spec, seed)) if cfg.ft_keep > 0 else None
    for k, kind in enumerate(KINDS):
        t0 = time.perf_counter()
        ft_seed = _model_seed(spec, seed) * 100 + TASK_NAMES.index(task) * 2 + k
        tower_state = finetune(model.module, spec, data[task].train, prompt_emb, kind, cfg, ft_seed, replay=replay)
        secs = time.perf_counter() - t0
        prov = {"kind": kind, "task": task, "base": f"world:{name}", "profile": profile, "seed": seed, "steps": cfg.ft_steps,
                "batch": cfg.ft_batch, "lr": cfg.ft_lr if kind == "full" else cfg.lora_lr, "keep": cfg.ft_keep,
                "lora": {"r": cfg.lora_rank, "alpha": cfg.lora_alpha, "targets": list(spec.lora_targets)} if kind == "lora" else None,
                "trained": "image tower, all parameters" if kind == "full" else "LoRA adapters (merged)", "seconds": secs}
        save_weights(path / "models" / name / "ft" / f"{task}.{kind}.safetensors", tower_state, prov)
        out[kind] = secs
    return {"model": name, "task": task, **out}


def job_evaluate(path: str, profile: str, seed: int, name: str) -> dict:
    """Accuracies (zero-shot, fine-tuned, oracle) and cached embeddings of one model on every grid."""
    import torch.nn.functional as F

    from ..descriptor import ProbeGrid
    from .measure import ModelView, oracle_accuracy
    from .train import set_determinism
    from .zoo import SPECS, load_weights, model_from_state

    set_determinism(1)
    path = Path(path)
    data, _, _ = _load_world_inputs(path)
    spec = SPECS[name]
    base_state, base_meta = load_weights(path / "models" / name / "base.safetensors")
    model = model_from_state(spec, base_state, f"world:{name}")
    sets = list(TASK_NAMES) + list(CONTROL_NAMES)
    G = {s: F.normalize(model.encode_texts(data[s].task.prompts).float(), dim=-1) for s in sets}

    def acc(z, s):
        return float(((F.normalize(z, dim=-1) @ G[s].T).argmax(1) == data[s].test.labels).float().mean())

    probes = {t: data[t].probes for t in TASK_NAMES}
    pre = {t: model.encode_probes(probes[t], batch_size=512) for t in TASK_NAMES}
    test = {s: model.encode_probes(data[s].test.images, batch_size=512) for s in sets}
    zero_shot = {s: acc(test[s].z, s) for s in sets}
    view = ModelView(model, {t: pre[t].z for t in TASK_NAMES}, {t: pre[t].u for t in TASK_NAMES}, G, {})
    finetuned, controls_after = {}, {}
    tensors = {}
    for kind in KINDS:
        finetuned[kind], controls_after[kind] = {}, {}
        for src in TASK_NAMES:
            ft_state, _ = load_weights(path / "models" / name / "ft" / f"{src}.{kind}.safetensors")
            ft_model = model_from_state(spec, {**base_state, **{f"image.{k}": v for k, v in ft_state.items()}})
            view.F_ft[(kind, src)] = {t: ft_model.encode_probes(probes[t], batch_size=512).z for t in TASK_NAMES}
            finetuned[kind][src] = acc(ft_model.encode_probes(data[src].test.images, batch_size=512).z, src)
            controls_after[kind][src] = {c: acc(ft_model.encode_probes(data[c].test.images, batch_size=512).z, c) for c in CONTROL_NAMES}
            for t in TASK_NAMES:
                tensors[f"ft.{kind}.{src}.{t}"] = view.F_ft[(kind, src)][t]
    grids = {t: ProbeGrid.from_probes(t, data[t].task.prompts, probes[t]) for t in TASK_NAMES}
    oracle = {kind: {t: oracle_accuracy(view, grids[t], kind, t, data[t].test.images, data[t].test.labels, alpha=1.0)
                     for t in TASK_NAMES} for kind in KINDS}
    for t in TASK_NAMES:
        tensors[f"pre.{t}"] = view.F_pre[t]
        tensors[f"test.z.{t}"] = test[t].z
        if pre[t].u is not None:
            tensors[f"pre.u.{t}"] = pre[t].u
            tensors[f"test.u.{t}"] = test[t].u
    for s in sets:
        tensors[f"G.{s}"] = G[s]
    _save_tensors(path / "views" / f"{name}.safetensors", tensors, {"model": name})
    return {"model": name, "zero_shot": zero_shot, "finetuned": finetuned, "controls_after": controls_after, "oracle": oracle,
            "logit_scale": model.logit_scale, "pretrain": base_meta.get("provenance", {}), "embed_dim": spec.embed_dim,
            "site": model.edit_site.describe(), "fingerprint": model.fingerprint}


def load_view(path: Path, name: str, data):
    """A `ModelView` rebuilt from views/NAME.safetensors (for the cross-model measurements)."""
    from .measure import ModelView
    from .zoo import SPECS, load_weights, model_from_state

    with safe_open(str(path / "views" / f"{name}.safetensors"), framework="pt") as f:
        t = {k: f.get_tensor(k) for k in f.keys()}
    state, _ = load_weights(path / "models" / name / "base.safetensors")
    model = model_from_state(SPECS[name], state, f"world:{name}")
    F_ft = {}
    for k, v in t.items():
        if k.startswith("ft."):
            _, kind, src, tgt = k.split(".")
            F_ft.setdefault((kind, src), {})[tgt] = v
    return ModelView(model, {x: t[f"pre.{x}"] for x in TASK_NAMES}, {x: t.get(f"pre.u.{x}") for x in TASK_NAMES},
                     {k[2:]: v for k, v in t.items() if k.startswith("G.")}, F_ft), t


# -- orchestration ----------------------------------------------------------------------------------

def _pool(workers: int):
    """Forked single-threaded workers (fork, not spawn: callers need no `if __name__ == "__main__"` guard)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork"), initializer=_init_worker)


def _init_worker() -> None:
    torch.set_num_threads(1)


def build_world(profile: str = "full", seed: int = 0, root: Path | None = None, force: bool = False, progress: bool = True,
                workers: int | None = None) -> Path:
    """Build (or rebuild with `force`) the world; returns its directory. Writes report.json / report.md."""
    from .zoo import MODEL_NAMES

    check_profile(profile)
    world_data.require_debian_data()
    path = world_dir(profile, seed, root)
    if (path / "COMPLETE").exists() and not force:
        return path
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    workers = workers or int(os.environ.get("PLATONIC_WORLD_WORKERS", "2"))
    prof = PROFILES[profile]
    timings = {}
    t_all = time.perf_counter()

    total = len(MODEL_NAMES) * (2 + len(TASK_NAMES))
    lines = LineProgress(total, f"building world ({profile})", enabled=progress)  # logs: one line per job
    lines.note(f"started in {path}")
    t0 = time.perf_counter()
    data = world_data.build_data(prof.sizes, seed, progress=progress, probes_per_class=prof.probes_per_class)
    _save_tensors(path / "data.safetensors", world_data.data_to_tensors(data), {"sizes": asdict(prof.sizes), "seed": seed})
    timings["data"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    from .text import SentenceEncoder

    vocab = world_data.caption_vocabulary()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    emb = SentenceEncoder().encode(vocab)  # a fresh encoder: embeddings depend only on the vocabulary
    torch.set_num_threads(threads)
    _save_tensors(path / "captions.safetensors", {"embeddings": emb}, {"vocab": vocab})
    timings["captions"] = time.perf_counter() - t0
    lines.note(f"data and caption embeddings ready ({len(vocab)} captions); {total} training jobs next")

    args = (str(path), profile, seed)
    pre_stats, ft_stats, evals = {}, [], {}
    t0 = time.perf_counter()
    with _pool(workers) as pool:
        futures = {pool.submit(job_pretrain, *args, m): ("pre", m) for m in MODEL_NAMES}
        pending = dict(futures)
        bar = iter(track(range(total), description=f"building world ({profile})", enabled=progress and not lines.active))
        while pending:
            for fut in as_completed(list(pending)):
                stage, m = pending.pop(fut)
                res = fut.result()
                next(bar, None)
                lines.step({"pre": f"pre-training {m}", "ft": f"fine-tuning {'/'.join(m) if isinstance(m, tuple) else m}",
                            "eval": f"evaluating {m}"}[stage])
                if stage == "pre":
                    pre_stats[m] = res
                    for t in TASK_NAMES:
                        pending[pool.submit(job_finetune, *args, m, t)] = ("ft", (m, t))
                elif stage == "ft":
                    ft_stats.append(res)
                    if sum(1 for r in ft_stats if r["model"] == m[0]) == len(TASK_NAMES):
                        pending[pool.submit(job_evaluate, *args, m[0])] = ("eval", m[0])
                else:
                    evals[m] = res
                break
        for _ in bar:
            pass
    timings["train_and_evaluate"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    report = cross_model_report(path, data, evals)
    timings["measure"] = time.perf_counter() - t0
    lines.note("cross-model report measured")
    timings["total"] = time.perf_counter() - t_all
    report.update({"profile": profile, "seed": seed, "world_version": WORLD_VERSION, "recipe": path.name, "workers": workers,
                   "threads_per_worker": 1, "timings_s": timings, "pretrain": pre_stats,
                   "finetune_seconds": {f"{r['model']}/{r['task']}": {k: r[k] for k in KINDS} for r in ft_stats}})
    atomic_write(path / "report.json", lambda tmp: Path(tmp).write_text(json.dumps(report, indent=1, sort_keys=True)))
    from .report import markdown_report

    atomic_write(path / "report.md", lambda tmp: Path(tmp).write_text(markdown_report(report)))
    atomic_write(path / "COMPLETE", lambda tmp: Path(tmp).write_text(json.dumps({"built": time.time()})))
    lines.note("complete")
    return path


def cross_model_report(path: Path, data, evals: dict) -> dict:
    """Per-model accuracies plus descriptor agreement and cross-model transfer, per fine-tune kind."""
    from ..descriptor import ProbeGrid
    from .measure import agreement, transfer_accuracy
    from .zoo import MODEL_NAMES

    views, raw = {}, {}
    for m in MODEL_NAMES:
        views[m], raw[m] = load_view(path, m, data)
    grids = {t: ProbeGrid.from_probes(t, data[t].task.prompts, data[t].probes) for t in TASK_NAMES}
    out = {"models": {m: evals[m] for m in MODEL_NAMES}, "agreement": {}, "transfer": {}}
    for kind in KINDS:
        out["agreement"][kind] = agreement(views, grids, kind)
        cells = {}
        for tgt in MODEL_NAMES:
            for t in TASK_NAMES:
                z, u = raw[tgt][f"test.z.{t}"], raw[tgt].get(f"test.u.{t}")
                labels = data[t].test.labels
                for src in MODEL_NAMES:
                    if src != tgt:
                        cells[f"{src}->{tgt}/{t}"] = transfer_accuracy(views[tgt], views[src], grids[t], kind, t, z, u, labels, 0.5)
        out["transfer"][kind] = cells
    out["summary"] = summarise(out)
    return out


def summarise(report: dict) -> dict:
    """The acceptance numbers: per model means, gains, recovery; per task cosines; overall means."""
    models = report["models"]
    s = {"per_model": {}, "per_task": {}, "overall": {}}
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    for m, r in models.items():
        zs = mean([r["zero_shot"][t] for t in TASK_NAMES])
        row = {"zero_shot": zs, "controls_zero_shot": {c: r["zero_shot"][c] for c in CONTROL_NAMES}, "logit_scale": r["logit_scale"]}
        for kind in KINDS:
            ft = mean([r["finetuned"][kind][t] for t in TASK_NAMES])
            orc = mean([r["oracle"][kind][t] for t in TASK_NAMES])
            gain = sum(r["finetuned"][kind][t] - r["zero_shot"][t] for t in TASK_NAMES)
            og = sum(r["oracle"][kind][t] - r["zero_shot"][t] for t in TASK_NAMES)
            xm = [v for k, v in report["transfer"][kind].items() if k.split("->")[1].startswith(m + "/")]
            row[kind] = {"finetuned": ft, "gain": ft - zs, "oracle_alpha1": orc, "oracle_recovery": og / gain if gain else float("nan"),
                         "cross_model_alpha05": mean(xm),
                         "controls_after": {c: mean([r["controls_after"][kind][t][c] for t in TASK_NAMES]) for c in CONTROL_NAMES}}
        s["per_model"][m] = row
    for kind in KINDS:
        ag = report["agreement"][kind]
        for t in TASK_NAMES:
            s["per_task"].setdefault(t, {})[kind] = {k: ag[t][k] for k in ("same_task_cross_model", "cross_task_within_model")}
            s["per_task"][t]["zero_shot_mean"] = mean([models[m]["zero_shot"][t] for m in models])
            s["per_task"][t]["zero_shot_max"] = max(models[m]["zero_shot"][t] for m in models)
            s["per_task"][t]["zero_shot_min"] = min(models[m]["zero_shot"][t] for m in models)
        s["overall"][kind] = {
            "same_task_cross_model": mean([ag[t]["same_task_cross_model"] for t in TASK_NAMES]),
            "cross_task_within_model": mean([ag[t]["cross_task_within_model"] for t in TASK_NAMES]),
            "oracle_recovery": mean([s["per_model"][m][kind]["oracle_recovery"] for m in models]),
            "finetune_gain": mean([s["per_model"][m][kind]["gain"] for m in models]),
            "cross_model_alpha05": mean([s["per_model"][m][kind]["cross_model_alpha05"] for m in models]),
            "oracle_alpha1": mean([s["per_model"][m][kind]["oracle_alpha1"] for m in models]),
        }
    s["overall"]["zero_shot"] = mean([s["per_model"][m]["zero_shot"] for m in models])
    s["checks"] = checks(s)
    return s


def checks(s: dict) -> dict:
    pm = s["per_model"]
    full, lora = s["overall"]["full"], s["overall"]["lora"]
    out = {
        "zero_shot_25_75_every_model": all(0.25 <= r["zero_shot"] <= 0.75 for r in pm.values()),
        "no_task_above_95_zero_shot_by_every_model": all(t["zero_shot_min"] <= 0.95 for t in s["per_task"].values()),
    }
    for kind, o in (("full", full), ("lora", lora)):
        out[f"{kind}: finetune_gain_15_every_model"] = all(r[kind]["gain"] >= 0.15 for r in pm.values())
        out[f"{kind}: same_task_cosine_mean_0.3"] = o["same_task_cross_model"] >= 0.3
        out[f"{kind}: same_task_above_cross_task"] = o["same_task_cross_model"] > o["cross_task_within_model"] + 0.1
        out[f"{kind}: oracle_recovery_40"] = o["oracle_recovery"] >= 0.4
    return out
