"""Image folders on disk for the YAML setups of this folder's tests: three two-class colour tasks and a control,
a listed source of ViT-S-32 (`write_image_world`, the `world_on_disk` fixture of conftest.py) and a setup YAML
over them (`setup_yaml`). Tests import these from here (as tiny_models' docstring says why)."""

import torch
import yaml
from PIL import Image
from safetensors.torch import save_file
from tiny_models import get_model

TASKS = {"reds": ("crimson", "scarlet"), "blues": ("navy", "sky_blue"), "greens": ("olive", "lime")}
SPLITS = {"train": 4, "val": 2, "test": 3}


def write_image_folder(root, classes, splits, seed):
    """root/SPLIT/CLASS/i.png of noisy single-colour images (one colour per class)."""
    g = torch.Generator().manual_seed(seed)
    for split, n in splits.items():
        for k, cls in enumerate(classes):
            folder = root / split / cls if split else root / cls
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                base = torch.tensor([40 + 90 * k, 120, 200 - 60 * k]).view(3, 1, 1)
                img = (base + 30 * torch.randn(3, 40, 48, generator=g)).clamp(0, 255).to(torch.uint8)
                Image.fromarray(img.permute(1, 2, 0).numpy()).save(folder / f"{i}.png")


def write_image_world(root):
    """root/data/{reds,blues,greens}/{train,val,test}/CLASS/, root/data/mixed/CLASS/ and root/ft/vit-reds.safetensors
    (a listed source: a partial state dict of ViT-S-32 with its image projection changed). Returns root."""
    for seed, (task, classes) in enumerate(TASKS.items()):
        write_image_folder(root / "data" / task, classes, SPLITS, seed)
    write_image_folder(root / "data" / "mixed", ("crimson", "navy", "olive"), {None: 2}, 9)
    pre = get_model("open_clip:ViT-S-32")
    g = torch.Generator().manual_seed(0)
    proj = pre.module.state_dict()["visual.proj"]
    (root / "ft").mkdir()
    save_file({"visual.proj": (proj + 0.3 * proj.std() * torch.randn(proj.shape, generator=g)).contiguous()},
              str(root / "ft" / "vit-reds.safetensors"))
    return root


def setup_yaml(root, **extra):
    """root/setup.yaml: two ViT-S-32 (random weights) on the folders of `write_image_world`, `extra` keys replaced."""
    cfg = {
        "name": "two real architectures",
        "models": {"vit": "open_clip:ViT-S-32", "vit2": "open_clip:ViT-S-32"},
        "tasks": {t: {"data": f"data/{t}", "template": "a photo of something {}."} for t in TASKS},
        "controls": {"mixed": {"data": "data/mixed"}},
        "sources": {"vit": {"reds": "ft/vit-reds.safetensors"}},
        "finetune": {"mode": "lora", "steps": 1, "batch_size": 4, "lr": 1e-3},
        "gradient_ascent": {"steps": 1, "batch_size": 4},
        "related_group": ["reds", "blues"],
        "held_out": "greens",
        "probes_per_class": 3,
        **extra,
    }
    path = root / "setup.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path
