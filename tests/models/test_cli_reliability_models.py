"""The command line on real architectures with random weights (issue 12): refusals are one line and
write nothing; solve then apply on one random-weight spec round-trips; bad fine-tunes are named."""

import warnings

import pytest
import torch
from tiny_models import clip_tokenizer, get_model, tiny_hf
from safetensors.torch import save_file
from test_measure_transfer import PROMPTS, perturbed_state, probes_n
from typer.testing import CliRunner

from platonic import Descriptor, InvalidInputError, ProbeGrid
from platonic.cli import app
from platonic.models import load_model


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def one_line_error(result, match):
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output and match in lines[0], lines[0]


def test_solve_refuses_a_tokenizer_that_cannot_encode_the_prompts(tmp_path):
    with pytest.warns(UserWarning, match="has none; load it with tokenizer="):
        tiny_hf("clip").save(tmp_path / "exp", {})  # its tokenizer is a plain callable: not saved
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bare = load_model(str(tmp_path / "exp"))  # transformers builds an empty-vocabulary tokenizer for it
    with pytest.raises(InvalidInputError, match="cannot encode them"):
        bare.encode_texts(PROMPTS)
    probes = probes_n(3)
    save_file({"probes": probes}, str(tmp_path / "probes.safetensors"))
    grid = ProbeGrid.from_probes("toy", PROMPTS, probes)
    Descriptor(torch.randn(grid.shape), grid).save(tmp_path / "toy.utd")
    result = run("solve", tmp_path / "toy.utd", "--target", tmp_path / "exp", "--probes", tmp_path / "probes.safetensors",
                 "-o", tmp_path / "exp.bank")
    one_line_error(result, "unknown tokens only")
    assert not (tmp_path / "exp.bank").exists()


def test_solve_then_apply_on_a_random_spec_round_trips(tmp_path):
    """`solve` and `apply` on one random-weight spec see one model, so apply is not refused; a huge alpha is."""
    source = get_model("open_clip:ViT-S-32")
    save_file(perturbed_state(source, scale=0.2), str(tmp_path / "ft.safetensors"))
    save_file({"probes": probes_n(4)}, str(tmp_path / "probes.safetensors"))
    assert run("measure", "--model", "open_clip:ViT-S-32", "--finetuned", tmp_path / "ft.safetensors", "--task", "toy",
               "--probes", tmp_path / "probes.safetensors", "--classes", "cat,dog", "-o", tmp_path / "toy.utd").exit_code == 0
    target = "open_clip:ViT-S-32@seed=7"
    result = run("solve", tmp_path / "toy.utd", "--target", target, "-o", tmp_path / "t.bank")
    assert result.exit_code == 0, result.output
    result = run("apply", "--target", target, "--bank", tmp_path / "t.bank", "--terms", "toy:+1",
                 "-o", tmp_path / "edited.safetensors")
    assert result.exit_code == 0, result.output
    result = run("apply", "--target", target, "--bank", tmp_path / "t.bank", "--terms", "toy:+1", "--alpha", "1e30",
                 "-o", tmp_path / "huge.safetensors")
    one_line_error(result, "times their norm")
    assert not (tmp_path / "huge.safetensors").exists()


def test_apply_refuses_to_write_over_its_own_target_checkpoint(tmp_path):
    model = get_model("open_clip:ViT-S-32")
    ckpt = tmp_path / "t.safetensors"
    save_file({k: v.contiguous() for k, v in model.module.state_dict().items()}, str(ckpt))
    before = ckpt.read_bytes()
    result = run("apply", "--target", f"open_clip:ViT-S-32@{ckpt}", "--bank", tmp_path / "any.bank", "--terms", "toy:+1",
                 "-o", ckpt)
    one_line_error(result, "also an input")
    assert ckpt.read_bytes() == before


def test_measure_refuses_to_write_an_all_zero_descriptor(tmp_path):
    pre = get_model("open_clip:ViT-S-32")
    same = {k: v.contiguous() for k, v in pre.module.state_dict().items() if k.startswith("visual.")}
    save_file(same, str(tmp_path / "same.safetensors"))  # a "fine-tune" that is the pre-trained tower
    save_file({"probes": probes_n(2)}, str(tmp_path / "probes.safetensors"))
    result = run("measure", "--model", "open_clip:ViT-S-32", "--finetuned", tmp_path / "same.safetensors", "--task", "toy",
                 "--probes", tmp_path / "probes.safetensors", "--classes", "cat,dog", "-o", tmp_path / "zero.utd")
    one_line_error(result, "changed nothing on these probes")
    assert not (tmp_path / "zero.utd").exists()


def test_anchored_solve_on_the_command_line_records_the_pool(tmp_path):
    """`solve --solve anchored --anchor-images DIR`: a folder of unlabeled images, loaded like probe images;
    the bank's operators record the kind, weight and pool digest, and `inspect` shows the kind."""
    from PIL import Image

    from platonic import OperatorBank

    probes = probes_n(4)
    save_file({"probes": probes}, str(tmp_path / "probes.safetensors"))
    grid = ProbeGrid.from_probes("toy", PROMPTS, probes)
    Descriptor(0.01 * torch.randn(grid.shape, generator=torch.Generator().manual_seed(0)), grid).save(tmp_path / "toy.utd")
    pool = tmp_path / "pool"
    pool.mkdir()
    g = torch.Generator().manual_seed(5)
    for i in range(3):
        Image.fromarray(torch.randint(0, 256, (40, 60, 3), dtype=torch.uint8, generator=g).numpy()).save(pool / f"{i}.png")
    result = run("solve", tmp_path / "toy.utd", "--target", "open_clip:ViT-S-32", "--probes", tmp_path / "probes.safetensors",
                 "--solve", "anchored", "--anchor-images", pool, "--anchor-weight", "2", "-o", tmp_path / "a.bank")
    assert result.exit_code == 0, result.output
    assert "anchored w=2" in result.output
    (op,) = list(OperatorBank.load(tmp_path / "a.bank"))
    assert op.solve_record["kind"] == "anchored" and op.solve_record["anchor_weight"] == 2.0
    assert op.solve_record["n_anchor"] == 3 and len(op.solve_record["anchor_digest"]) == 64
    result = run("solve", tmp_path / "toy.utd", "--target", "open_clip:ViT-S-32", "--probes", tmp_path / "probes.safetensors",
                 "--solve", "anchored", "--anchor-images", tmp_path / "nopool", "-o", tmp_path / "b.bank")
    one_line_error(result, "--anchor-images")
    assert not (tmp_path / "b.bank").exists()


# -- issue 34 ---------------------------------------------------------------------------------------------

@pytest.fixture
def local_clip(tmp_path, monkeypatch):
    """A transformers CLIP saved as a local directory models/clip (with its tokenizer), the working directory
    its parent; a descriptor on four probes and the probe file."""
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (tmp_path / "models").mkdir()
        tiny_hf("clip", tokenizer=clip_tokenizer()).save(tmp_path / "models" / "clip")
    probes = probes_n(4)
    save_file({"probes": probes}, str(tmp_path / "probes.safetensors"))
    grid = ProbeGrid.from_probes("toy", PROMPTS, probes)
    Descriptor(0.05 * torch.randn(grid.shape, generator=torch.Generator().manual_seed(0)), grid).save(tmp_path / "toy.utd")
    return tmp_path


def quiet_load(spec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_model(spec)


def test_fingerprints_do_not_depend_on_how_a_path_is_spelt(local_clip):
    """Defect 2: the architecture id embedded the load path, so a bank solved on `models/clip` was refused for
    `./models/clip`, the absolute path or a copy (the weights hash identical)."""
    import shutil

    shutil.copytree(local_clip / "models" / "clip", local_clip / "copy")
    spellings = ["models/clip", "./models/clip", str(local_clip / "models" / "clip"), "copy"]
    assert len({quiet_load(s).fingerprint for s in spellings}) == 1
    assert run("solve", "toy.utd", "--target", "models/clip", "--probes", "probes.safetensors", "-o", "t.bank").exit_code == 0
    for i, spelling in enumerate(spellings[1:]):
        result = run("apply", "--target", spelling, "--bank", "t.bank", "--terms", "toy:+1", "-o", f"edited{i}")
        assert result.exit_code == 0 and "solved on these weights" in result.stdout, result.output
    oc = get_model("open_clip:ViT-S-32")
    oc.save_directory(local_clip / "oc", {})
    shutil.copytree(local_clip / "oc", local_clip / "oc-copy")
    fingerprints = {quiet_load(f"open_clip:local-dir:{d}").fingerprint
                    for d in ("oc", "./oc", str(local_clip / "oc"), "oc-copy")}
    assert len(fingerprints) == 1


def test_an_export_names_its_base_so_the_bases_bank_applies_again(local_clip):
    """Defect 2: an export's provenance names the fingerprint of the model it was edited from; a bank solved on
    that base applies to the export again, and `apply` says so."""
    import json

    base = quiet_load("models/clip").fingerprint
    assert run("solve", "toy.utd", "--target", "models/clip", "--probes", "probes.safetensors", "-o", "t.bank").exit_code == 0
    assert run("apply", "--target", "models/clip", "--bank", "t.bank", "--terms", "toy:+1", "-o", "once").exit_code == 0
    assert json.loads((local_clip / "once" / "platonic_provenance.json").read_text())["base_fingerprint"] == base
    assert quiet_load("once").fingerprint != base
    result = run("apply", "--target", "once", "--bank", "t.bank", "--terms", "toy:+1", "--alpha", "0.25", "-o", "twice")
    assert result.exit_code == 0, result.output
    assert "on the model this export was edited from" in result.stdout
    record = json.loads((local_clip / "twice" / "platonic_provenance.json").read_text())
    assert record["base_fingerprint"] == base and [e["alpha"] for e in record["edits"]] == [0.5, 0.25]
    assert [e["target_match"] for e in record["edits"]] == ["current", "export's base"]


def test_a_diverging_finetune_stops_at_the_first_non_finite_loss_and_writes_nothing(local_clip):
    """Defect 5: --lr 1e30 went on to write 40 of 40 changed tensors NaN, exit 0."""
    from image_folders import write_image_folder

    write_image_folder(local_clip / "data", ("crimson", "navy"), {"train": 4, "test": 2}, 0)
    result = run("finetune", "models/clip", "--task", "t=data", "--mode", "full", "--steps", "5", "--batch-size", "4",
                 "--lr", "1e30", "-o", "ft")
    one_line_error(result, "fine-tuning diverged: the loss is nan at step")
    assert "Lower the learning rate (--lr)" in result.stderr and not (local_clip / "ft").exists()


def test_a_wrong_probe_file_is_named_as_such(local_clip):
    """Defect 14: a wrong --probes got "pass them explicitly (--probes)"."""
    save_file({"probes": probes_n(4, seed=9)}, str(local_clip / "other.safetensors"))
    result = run("solve", "toy.utd", "--target", "models/clip", "--probes", "other.safetensors", "-o", "t.bank")
    one_line_error(result, "the probes given (--probes; digest")
    assert "are not the ones the descriptor of 'toy'" in result.stderr and not (local_clip / "t.bank").exists()


def test_a_lora_finetune_has_its_own_card_and_a_wrong_rank_is_named(local_clip):
    """Comfort: a LoRA fine-tune's README was peft's empty template. Defect 14: a wrong adapter `r` got
    "weights match neither"."""
    import json

    from image_folders import write_image_folder

    write_image_folder(local_clip / "data", ("crimson", "navy"), {"train": 4, "test": 2}, 0)
    result = run("finetune", "models/clip", "--task", "t=data", "--steps", "2", "--batch-size", "4", "-o", "ft")
    assert result.exit_code == 0, result.output
    card = (local_clip / "ft" / "README.md").read_text()
    assert "LoRA fine-tune of `models/clip` on `t`" in card and "platonic measure --finetuned" in card
    config = json.loads((local_clip / "ft" / "adapter_config.json").read_text())
    config["r"] = 2 * config["r"]
    (local_clip / "ft" / "adapter_config.json").write_text(json.dumps(config))
    result = run("measure", "--model", "models/clip", "--finetuned", "ft", "--task", "t", "--probes",
                 "probes.safetensors", "--classes", "crimson,navy", "-o", "d.utd")
    one_line_error(result, "the LoRA adapter's weights do not have the shapes its adapter_config.json")


def test_an_unchanged_experiment_source_is_named():
    """Defect 14: an unchanged source got "cosine of a zero descriptor" (no source named)."""
    from platonic.experiments.engine import EvalSet, TaskSpec, measure_on_grids

    model = get_model("hf:tiny-clip")
    probes = probes_n(3)
    tasks = {"toy": TaskSpec("toy", tuple(PROMPTS), probes, EvalSet("toy", probes, torch.zeros(3, dtype=torch.long),
                                                                     tuple(PROMPTS)))}
    with pytest.raises(InvalidInputError, match="the fine-tune of m/toy .* changed nothing on these probes"):
        measure_on_grids({"m": model}, tasks, lambda m, t: model, progress=False)
