"""platonic experiment task_arithmetic on a YAML setup of a real architecture (open_clip's ViT, random weights)."""

import json

import pytest
import yaml
from image_folders import TASKS
from tiny_models import tiny_open_clip_dir
from typer.testing import CliRunner

from platonic.cli import app


@pytest.mark.slow
def test_task_arithmetic_on_a_yaml_setup_runs_attft_lora_att_and_linear_on_open_clip(world_on_disk):
    """Packed nn.MultiheadAttention: ATT-FT on in_proj / out_proj, peft's LoRA on it, jvp without its fast path;
    the YAML's `task_vectors:` block sets the fine-tunes' recipe, --steps its steps. The model is open_clip's ViT-S-32
    config at a test's size in a local directory (`tiny_models.TINY_OPEN_CLIP_VIT`): the same classes, and the 21
    alphas of every fine-tune and negation cost seconds, not the minutes ViT-S-32's 224 px passes took.
    (full, the cache re-use and the merge rules beside the sum are covered on the toy setup, tests/test_task_arithmetic.py.)"""
    root = world_on_disk
    cfg = {"name": "one open_clip ViT", "models": {"vit": tiny_open_clip_dir(root / "tiny-vit")},
           "tasks": {t: {"data": f"data/{t}", "template": "a photo of something {}."} for t in TASKS},
           "controls": {"mixed": {"data": "data/mixed"}}, "probes_per_class": 2,
           "task_vectors": {"batch_size": 8, "steps": 5}}  # --steps 2 below replaces the block's steps
    (root / "ta.yaml").write_text(yaml.safe_dump(cfg))
    args = ["experiment", "task_arithmetic", "--setup", str(root / "ta.yaml"), "--flavours", "attention,lora,linear",
            "--tasks", "reds,blues", "--lambdas", "1", "--steps", "2", "--negation-flavours", "attention", "--merges", "sum",
            "--no-plots"]
    result = CliRunner().invoke(app, [*args, "-o", str(root / "run")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "0 from the cache" in result.output
    results = json.loads((root / "run" / "results.json").read_text())
    recipe = results["settings"]["task_arithmetic"]["recipe"]
    assert (recipe["batch_size"], recipe["steps"], recipe["lr"]) == (8, 2, 1e-3)  # the YAML's, --steps, the default
    cells = results["cells"]
    rows = {(c["method"], c["orthoreg"]) for c in cells if c["experiment"] == "task_arithmetic/addition"}
    assert rows == {("zero_shot", False)} | {(f, o) for f in ("attention", "lora", "linear") for o in (False, True)}
    negated = {(c["method"], c["orthoreg"], c["tasks"][0]) for c in cells if c["experiment"] == "task_arithmetic/negation"}
    assert negated == {("attention", o, t) for o in (False, True) for t in ("reds", "blues")}
    tables = (root / "run" / "tables.md").read_text()
    assert "| ATT-FT + OrthoReg |" in tables and "| LoRA-ATT |" in tables and "| TTA (linear) |" in tables


def test_task_arithmetic_command_line_errors(world_on_disk, tmp_path):
    runner = CliRunner()

    def run(*args):
        r = runner.invoke(app, list(args), env={"COLUMNS": "200"})
        return r.exit_code, r.output

    code, out = run("experiment", "task_arithmetic", "addition", "-o", str(tmp_path / "a"))
    assert code != 0 and "run it alone" in out
    code, out = run("experiment", "addition", "--flavours", "full", "-o", str(tmp_path / "b"))
    assert code != 0 and "task_arithmetic experiment only" in out
    code, out = run("experiment", "task_arithmetic", "--lambdas", "1,x", "--world", str(tmp_path), "-o", str(tmp_path / "c"))
    assert code != 0 and "comma-separated numbers" in out
    code, out = run("experiment", "task_arithmetic", "--world", str(tmp_path), "-o", str(tmp_path / "d"))
    assert code != 0 and "not a built world" in out
    code, out = run("experiment", "task_arithmetic", "--alpha", "0.5", "-o", str(tmp_path / "e"))
    assert code != 0 and "--alpha does not apply to task_arithmetic" in out
    bad = {"models": {"vit": "open_clip:ViT-S-32"}, "tasks": {t: {"data": f"data/{t}"} for t in TASKS},
           "task_vectors": {"batch_size": 0}}
    (world_on_disk / "bad.yaml").write_text(yaml.safe_dump(bad))
    code, out = run("experiment", "task_arithmetic", "--setup", str(world_on_disk / "bad.yaml"), "-o", str(tmp_path / "f"))
    assert code != 0 and "task_vectors.batch_size" in out and "Traceback" not in out and not (tmp_path / "f").exists()
