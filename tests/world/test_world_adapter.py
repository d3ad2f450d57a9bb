"""The adapter route on the (tiny) world: it fits what the closed form cannot, and the CLI round trip."""

import json

import pytest
from safetensors.torch import save_file
from typer.testing import CliRunner

from platonic import AdaptConfig, Operator, adapt
from platonic.cli import app
from platonic.experiments.setups.world import world_data
from platonic.measurement import EmbeddingCache, measure, target_grid
from platonic.models import load_model
from platonic.world.image.data import TASKS
from platonic.world.common.weights import load_weights


@pytest.fixture(scope="module")
def data(tiny_world):
    return world_data(tiny_world["path"])


@pytest.mark.parametrize("model_name,task", [("vit-a", "shapes"), ("mixer", "fashion")])
def test_adapter_fits_the_targets_own_descriptor_better_than_the_closed_form(model_name, task, data, tmp_path):
    """On a grid with more probes than embedding dimensions (the tiny world's whole train split; its 4 probes per
    class are fewer than d, where the closed form fits almost anything), the LoRA, which reaches every layer,
    follows the fine-tune's descriptor more closely than the last-layer operator."""
    cache = EmbeddingCache(tmp_path / "emb")
    probes = data[task].train.images
    desc = measure(f"world:{model_name}", f"world:{model_name}/{task}", probes, TASKS[task].prompts, task,
                   cache=cache, progress=False)
    target = load_model(f"world:{model_name}")
    assert desc.shape[0] > target.embed_dim
    F, G = target_grid(target, probes, desc.grid.prompts, cache=cache, progress=False)
    closed_form = Operator.solve(F, G, desc, target=target.fingerprint, form=target.edit_site.form).residual
    # lr 3e-3: the adapter learning rate chosen on the world's validation splits (README, research/adapter_validation.py).
    # At 1e-3 vit-a / shapes lost once the world moved to 128-d embeddings (0.090 vs 0.087), where the closed
    # form has 4x the parameters; mixer / fashion won at both rates.
    # 40 epochs (280 steps on these 400 probes, under the paper's 540-step cap): at the paper's 20 epochs (140 steps)
    # the adapter is still descending; on recipe 089d829ab416's tiny world mixer / fashion then stood at 0.127 against
    # the closed form's 0.123, and at 0.078 after 280 steps (0.051 after 540).
    adapter = adapt(target, desc, config=AdaptConfig(lr=3e-3, epochs=40), probes={desc.grid.probe_digest: probes},
                    cache=cache, progress=False)
    (fit,) = adapter.report["relative_residual"].values()
    print(f"\n{model_name}/{task}: adapter relative residual {fit:.3f} ({adapter.report['steps']} steps) vs "
          f"closed-form first-order residual {closed_form:.3f}")
    assert fit < closed_form


def test_cli_adapter_route_writes_the_adapter_and_the_export(data, tmp_path):
    runner = CliRunner()
    save_file({"probes": data["fashion"].probes.contiguous()}, str(tmp_path / "probes.safetensors"))
    (tmp_path / "prompts.txt").write_text("\n".join(TASKS["fashion"].prompts))
    result = runner.invoke(app, ["measure", "--model", "world:vit-a", "--finetuned", "world:vit-a/fashion", "--task", "fashion",
                                 "--probes", str(tmp_path / "probes.safetensors"), "--prompts", str(tmp_path / "prompts.txt"),
                                 "-o", str(tmp_path / "fashion.utd")])
    assert result.exit_code == 0, result.output
    out = tmp_path / "mixer+fashion.safetensors"
    result = runner.invoke(app, ["apply", "--route", "adapter", "--target", "world:mixer", "--descriptors",
                                 str(tmp_path / "fashion.utd"), "--terms", "fashion:+1", "--max-steps", "5", "-o", str(out)],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "relative residual" in result.output
    adapter_dir = tmp_path / "mixer+fashion.adapter"
    assert (adapter_dir / "adapter_config.json").exists() and (adapter_dir / "adapter_model.safetensors").exists()
    _, meta = load_weights(out)
    (edit,) = meta["provenance"]["edits"]
    assert edit["route"] == "adapter" and edit["terms"][0]["task"] == "fashion"
    assert edit["settings"]["max_steps"] == 5 and json.loads((adapter_dir / "adapter_config.json").read_text())["r"] == 16

    missing = runner.invoke(app, ["apply", "--route", "adapter", "--target", "world:mixer", "--descriptors",
                                  str(tmp_path / "fashion.utd"), "--terms", "digits:+1", "-o", str(tmp_path / "x.safetensors")])
    assert missing.exit_code == 2 and "has no descriptor" in missing.output
    no_bank = runner.invoke(app, ["apply", "--target", "world:mixer", "--terms", "fashion:-1", "-o", str(tmp_path / "y")])
    assert no_bank.exit_code == 2 and "needs --bank" in no_bank.output
    assert not (tmp_path / "x.safetensors").exists() and not (tmp_path / "y").exists()


def test_cli_closed_form_negation_defaults_to_the_papers_strength(data, tmp_path):
    runner = CliRunner()
    save_file({"probes": data["shapes"].probes.contiguous()}, str(tmp_path / "probes.safetensors"))
    (tmp_path / "prompts.txt").write_text("\n".join(TASKS["shapes"].prompts))
    args = ["--probes", str(tmp_path / "probes.safetensors")]
    assert runner.invoke(app, ["measure", "--model", "world:vit-a", "--finetuned", "world:vit-a/shapes", "--task", "shapes",
                               *args, "--prompts", str(tmp_path / "prompts.txt"), "-o", str(tmp_path / "s.utd")]).exit_code == 0
    assert runner.invoke(app, ["solve", str(tmp_path / "s.utd"), "--target", "world:vit-b", *args,
                               "-o", str(tmp_path / "b.bank")]).exit_code == 0
    for terms, alpha in (("shapes:-1", 1.0), ("shapes:+1", 0.5)):
        out = tmp_path / f"{alpha}.safetensors"
        result = runner.invoke(app, ["apply", "--target", "world:vit-b", "--bank", str(tmp_path / "b.bank"), "--terms", terms,
                                     "-o", str(out)], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert f"alpha = {alpha:g}" in result.output
        assert load_weights(out)[1]["provenance"]["edits"][0]["alpha"] == alpha
