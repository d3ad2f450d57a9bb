"""`platonic run RECIPE.yaml` end to end on a random-weight open_clip model and a random-weight transformers
CLIP with image-folder data sets; the exports reloaded by open_clip / transformers alone."""

import json

import open_clip
import pytest
import torch
import yaml
from tiny_models import clip_tokenizer, get_model, tiny_hf
from huggingface_hub import ModelCard
from safetensors.torch import save_file
from image_folders import write_image_folder
from test_native_exports import image_features
from typer.testing import CliRunner

from platonic.adapter import Adapter
from platonic.bank import OperatorBank
from platonic.cli import app
from platonic.models import load_model
from platonic.transfer import apply

PIXELS = torch.randn(3, 3, 224, 224, generator=torch.Generator().manual_seed(1))


@pytest.fixture
def recipe_dir(tmp_path):
    for seed, (task, classes) in enumerate({"reds": ("crimson", "scarlet"), "blues": ("navy", "sky_blue")}.items()):
        write_image_folder(tmp_path / "data" / task, classes, {"train": 4, "test": 3}, seed)
    write_image_folder(tmp_path / "data" / "mixed", ("crimson", "navy", "olive"), {None: 2}, 9)
    tiny_hf("clip", tokenizer=clip_tokenizer()).save(tmp_path / "tiny-clip")  # a local transformers directory
    pre = get_model("open_clip:ViT-S-32")
    proj = pre.module.state_dict()["visual.proj"]
    g = torch.Generator().manual_seed(0)
    save_file({"visual.proj": (proj + 0.3 * proj.std() * torch.randn(proj.shape, generator=g)).contiguous()},
              str(tmp_path / "oc-reds.safetensors"))
    recipe = {
        "name": "two-backends",
        "models": {"oc": "open_clip:ViT-S-32", "hfc": "tiny-clip"},
        "tasks": {"reds": {"data": "data/reds"}, "blues": {"data": "data/blues"}},
        "controls": {"mixed": {"data": "data/mixed"}},
        "sources": {"oc": {"reds": "oc-reds.safetensors"}},
        "finetune": {"mode": "lora", "steps": 1, "batch_size": 4, "lr": 1e-2},
        "probes_per_class": 3,
        "edits": [
            {"name": "add", "terms": "reds:+1,blues:+1", "alpha": 0.5},
            {"name": "forget", "terms": ["reds:-1", "blues:-1"], "sources": "self"},
            {"name": "fit", "terms": {"blues": 1}, "route": "adapter", "targets": ["oc"], "sources": ["hfc"],
             "adapter": {"max_steps": 2, "batch_size": 4}},
        ],
        "exports": [
            {"edit": "add", "target": "oc", "path": "exports/oc-add"},
            {"edit": "add", "target": "hfc", "path": "exports/hfc-add", "base_model": "openai/clip-vit-base-patch32"},
            {"edit": "fit", "target": "oc", "path": "exports/oc-fit"},
        ],
    }
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    return tmp_path


@pytest.mark.slow
def test_a_recipe_runs_end_to_end_and_its_exports_load_alone(recipe_dir):
    out = recipe_dir / "run"
    result = CliRunner().invoke(app, ["run", str(recipe_dir / "recipe.yaml"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert results["schema"] == "platonic.recipe_run" and results["versions"]["open_clip_torch"]
    assert results["device"]["device"] == "cpu"
    assert results["finetunes"] == {"hfc/blues": "trained", "hfc/reds": "trained", "oc/blues": "trained"}
    cells = {(c["edit"], c["target"], c["source"], json.dumps(c["terms"])) for c in results["cells"]}
    assert len(cells) == 2 + 4 + 1  # add: 2 targets x 1 other; forget: 2 x 2 compositions; fit: 1
    assert {p.name for p in out.iterdir()} >= {"recipe.yaml", "recipe.json", "results.json", "tables.md", "descriptors",
                                               "banks", "exports", "adapters"}
    assert yaml.safe_load((out / "recipe.yaml").read_text())["models"]["hfc"] == str(recipe_dir / "tiny-clip")
    assert "## Edit `add` (closed form)" in (out / "tables.md").read_text()

    # open_clip alone loads the closed-form export; it embeds as the model platonic edits from the run's bank
    edited = load_model("open_clip:ViT-S-32")
    apply(edited, OperatorBank.load(out / "banks" / "oc.from-hfc.bank"), {"reds": 1.0, "blues": 1.0}, alpha=0.5)
    alone, _, _ = open_clip.create_model_and_transforms(f"local-dir:{out / 'exports' / 'oc-add'}")
    with torch.no_grad():
        assert torch.allclose(alone.eval().encode_image(PIXELS), edited.module.encode_image(PIXELS), atol=1e-5)
    card = ModelCard.load(out / "exports" / "oc-add" / "README.md")
    assert card.data.library_name == "open_clip" and "two-backends" in card.text and "descriptor sha256" in card.text

    # transformers alone loads its export, with the card's base_model
    from transformers import AutoModel

    edited = load_model(str(recipe_dir / "tiny-clip"))
    apply(edited, OperatorBank.load(out / "banks" / "hfc.from-oc.bank"), {"reds": 1.0, "blues": 1.0}, alpha=0.5)
    alone = AutoModel.from_pretrained(out / "exports" / "hfc-add").eval()
    small = torch.nn.functional.interpolate(PIXELS, size=32)
    with torch.no_grad():
        assert torch.allclose(image_features(alone, small), image_features(edited.model, small), atol=1e-5)
    assert ModelCard.load(out / "exports" / "hfc-add" / "README.md").data.base_model == "openai/clip-vit-base-patch32"

    # the adapter export: open_clip alone, equal to the run's adapter merged by platonic
    edited = Adapter.load(out / "adapters" / "exports" / "oc-fit").merge_into(load_model("open_clip:ViT-S-32"))
    alone, _, _ = open_clip.create_model_and_transforms(f"local-dir:{out / 'exports' / 'oc-fit'}")
    with torch.no_grad():
        assert torch.allclose(alone.eval().encode_image(PIXELS), edited.module.encode_image(PIXELS), atol=1e-5)

    # the fast path and the real edited model agree on every exported closed-form cell
    for export in results["exports"]:
        if export["route"] == "closed_form":
            cell = next(c for c in results["cells"] if (c["edit"], c["target"], c["source"]) ==
                        (export["edit"], export["target"], export["source"]))
            for name, acc in export["accuracy_end_to_end"].items():
                assert abs(acc - cell["accuracy"][name]) < 1e-9, (export["path"], name)

    # `platonic report` re-renders a recipe run's tables (issue 34: it refused the run directory)
    tables = (out / "tables.md").read_text()
    result = CliRunner().invoke(app, ["report", str(out)])
    assert result.exit_code == 0 and (out / "tables.md").read_text() == tables, result.output

    # a second run reads every fine-tune from the cache and replaces the previous run directory
    result = CliRunner().invoke(app, ["run", str(recipe_dir / "recipe.yaml"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert set(json.loads((out / "results.json").read_text())["finetunes"].values()) == {"cached"}


BAD = [
    ({"edits": [{"name": "x", "terms": "reds:+1", "targets": ["nope"]}]}, "edits.0 (x).targets: unknown model(s) nope"),
    ({"edits": [{"name": "x", "terms": "greens:+1"}]}, "unknown task(s) greens; add them under tasks"),
    ({"edits": [{"name": "x", "terms": "reds:+1", "route": "lora"}]}, "edits.0.route: Input should be 'closed_form' or 'adapter'"),
    ({"edits": [{"name": "x", "terms": "reds:+1", "route": "adapter", "alpha": 0.5}]}, "the adapter route has no alpha"),
    ({"exports": [{"edit": "add", "target": "oc", "path": "/tmp/x"}]}, "must be a relative path inside the run directory"),
    ({"exports": [{"edit": "nope", "target": "oc", "path": "x"}]}, "exports.0.edit: no edit named 'nope'"),
    ({"exports": [{"edit": "forget", "target": "oc", "path": "x"}]}, "exports.0.terms: edit 'forget' has 2 compositions"),
    ({"finetune": None, "sources": {}}, "no fine-tuned source for"),
    ({"edits": [{"name": "x", "terms": "reds:+1", "adapter": {"rank": 0}}]}, "edits.0.adapter.rank"),
    ({"tasks": {"reds": {"data": "data/reds", "finetune": {"schedule": "linear"}}, "blues": {"data": "data/blues"}}},
     "tasks.reds.finetune: schedule: Input should be 'cosine' or 'constant'"),
    ({"tasks": {"reds": {"data": "data/reds", "finetune": {"epochs": 1}}, "blues": {"data": "data/blues"}},
      "finetune": None}, "tasks.reds.finetune changes the `finetune:` block, which is missing; add one"),
    ({"controls": {"mixed": {"data": "data/mixed", "finetune": {"epochs": 1}}}},
     "controls.mixed.finetune: nothing is fine-tuned on a control"),
    ({"models": {"oc": "open_clip:ViT-Nope"}, "edits": [{"name": "x", "terms": "reds:+1", "sources": "self"}], "exports": []},
     "models.oc: open_clip has no architecture 'ViT-Nope'"),
]


@pytest.mark.parametrize("change, message", BAD)
def test_a_bad_recipe_is_one_line_naming_the_field(recipe_dir, change, message):
    recipe = yaml.safe_load((recipe_dir / "recipe.yaml").read_text())
    recipe.update(change)
    if "edits" in change and "exports" not in change:
        recipe["exports"] = []
    (recipe_dir / "bad.yaml").write_text(yaml.safe_dump(recipe))
    result = CliRunner().invoke(app, ["run", str(recipe_dir / "bad.yaml"), "--check"])
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_check_validates_without_loading(recipe_dir):
    result = CliRunner().invoke(app, ["run", str(recipe_dir / "recipe.yaml"), "--check"])
    assert result.exit_code == 0 and "valid; 2 models, 2 tasks, 1 controls, 3 edits (7 cells), 3 exports" in result.output


def test_a_tasks_finetune_change_replaces_the_blocks_length():
    from platonic.experiments.setups import task_finetune
    from platonic.finetuning.training import FinetuneConfig

    block = FinetuneConfig(mode="lora", steps=50, lr=1e-3, schedule="constant")
    one_epoch = task_finetune(block, "sun397", {"epochs": 1})
    assert (one_epoch.epochs, one_epoch.steps, one_epoch.lr, one_epoch.mode, one_epoch.schedule) == (1, None, 1e-3, "lora", "constant")
    assert one_epoch.total_steps(640) == 640 // 64
    assert task_finetune(block, "dtd", None) is block and task_finetune(block, "dtd", {}) is block
    assert task_finetune(FinetuneConfig(epochs=3), "x", {"steps": 9}).total_steps(10**6) == 9


def test_a_recipe_strength_beyond_the_fold_bound_is_refused_like_apply(recipe_dir):
    """Defect 7: a recipe's `alpha: 1e30` reported accuracies (the fast path folds nothing), where `apply` refused
    the same alpha: every path that folds or evaluates an edit has one bound (`edit.check_fold`)."""
    recipe = yaml.safe_load((recipe_dir / "recipe.yaml").read_text())
    recipe["edits"] = [{"name": "huge", "terms": "reds:+1", "alpha": 1e30, "targets": ["oc"], "sources": "self"}]
    recipe["exports"] = []
    (recipe_dir / "huge.yaml").write_text(yaml.safe_dump(recipe))
    result = CliRunner().invoke(app, ["run", str(recipe_dir / "huge.yaml"), "-o", str(recipe_dir / "run")])
    assert result.exit_code == 2 and "times their norm" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not (recipe_dir / "run").exists()
