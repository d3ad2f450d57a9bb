"""Data sources (issue 14 item 1): image folders, hf: (a data set saved to disk), torchvision: (a fake MNIST
root), the registry of the paper's tasks, the paper's seeded draws, and decoding only what is used."""

import struct

import numpy as np
import pytest
import torch
from PIL import Image

from platonic import InvalidInputError
from platonic.data import images as data_images
from platonic.data.probes import control_indices, probe_draw, probe_indices
from platonic.data.resolve import open_task
from platonic.data.sources import parse_source, task_split
from platonic.data.tasks import KNOWN_TASKS, KnownTask, TaskRegistry, known_task

from helpers import call_log

datasets = pytest.importorskip("datasets")


def _picture(value: int, w: int = 30, h: int = 20) -> Image.Image:
    return Image.fromarray(np.full((h, w, 3), value % 256, np.uint8))


def save_hf(root, splits: dict[str, int], names=("tabby_cat", "dog", "fox"), label=True):
    """A tiny DatasetDict saved with save_to_disk: splits name -> images per class."""
    columns = {"image": datasets.Image()}
    if label:
        columns["label"] = datasets.ClassLabel(names=list(names))
    parts = {}
    for split, per_class in splits.items():
        labels = [c for _ in range(per_class) for c in range(len(names))]
        data = {"image": [_picture(7 * i) for i in range(len(labels))]}
        if label:
            data["label"] = labels
        else:
            data["caption"] = [f"image {i}" for i in range(len(labels))]
            columns["caption"] = datasets.Value("string")
        parts[split] = datasets.Dataset.from_dict(data, features=datasets.Features(columns))
    datasets.DatasetDict(parts).save_to_disk(str(root))
    return root


@pytest.fixture
def decoded(monkeypatch):
    """Counts every image a data source decodes (platonic.data.images.open_image)."""
    return call_log(monkeypatch, data_images, "open_image")


# -- the registry -----------------------------------------------------------------------------------

PAPER = [  # name, classes, template (method.md §1.6)
    ("eurosat", 10, "a centered satellite photo of {}."), ("dtd", 47, "a photo of a {} texture."),
    ("gtsrb", 43, "a photo of a {} traffic sign."), ("mnist", 10, "a photo of the number {}."),
    ("svhn", 10, "a photo of the number {}."), ("resisc45", 45, "a satellite photo of {}."),
    ("cars", 196, "a photo of a {}."), ("sun397", 397, "a photo of a {}."), ("cifar100", 100, "a photo of a {}."),
    ("imagenet", 1000, "a photo of a {}."),
]


@pytest.mark.parametrize("name,classes,template", PAPER)
def test_each_registered_task_has_its_class_count_and_the_papers_template(name, classes, template):
    task = known_task(name)
    assert len(task.classes) == classes
    # open_clip's ImageNet names repeat two (crane the bird / the machine; maillot twice), as CLIP's do
    assert len(set(task.classes)) == classes - (2 if name == "imagenet" else 0)
    assert task.template == template and len(task.prompts()) == classes
    assert task.source.startswith("hf:")
    assert task.kind == ("control" if name in ("cifar100", "imagenet") else "task")


def test_registry_names_and_cleaning():
    assert known_task("eurosat").prompts()[0] == "a centered satellite photo of annual crop land."
    assert known_task("cars").classes[0] == "am general hummer suv 2000"  # the reference code's clean_class_name
    assert "aquarium fish" in known_task("cifar100").classes and "crab" in known_task("cifar100").classes
    assert sorted(KNOWN_TASKS.names()) == sorted(n for n, _, _ in PAPER)


def test_a_registry_refuses_duplicates_and_names_the_known_tasks():
    registry = TaskRegistry()
    registry.register(KnownTask("a", "A", ("x",), "{}", "hf:o/a"))
    with pytest.raises(InvalidInputError, match="registered already"):
        registry.register(KnownTask("a", "A again", ("y",), "{}", "hf:o/b"))
    with pytest.raises(InvalidInputError, match="registered already"):
        KNOWN_TASKS.register(KnownTask("eurosat", "EuroSAT", ("x",), "{}", "hf:o/e"))
    with pytest.raises(InvalidInputError, match=r"unknown task 'eurosatt'; the registry knows cars, cifar100, dtd"):
        known_task("eurosatt")


# -- the paper's draws ------------------------------------------------------------------------------

def test_probes_and_controls_are_the_papers_seeded_draws():
    # probes: the first 30 x classes of one permutation seeded 42, no quota, in sorted order
    expected = torch.randperm(1000, generator=torch.Generator().manual_seed(42))[:90]
    assert torch.equal(probe_indices(1000, 3), expected)
    assert torch.equal(probe_draw(1000, 3), expected.sort().values)
    # controls: per class in label order, the first 10 of a permutation from one shared generator
    labels = torch.arange(300) % 7
    g = torch.Generator().manual_seed(42)
    reference = torch.cat([(labels == c).nonzero().flatten()[torch.randperm(int((labels == c).sum()), generator=g)[:10]]
                           for c in range(7)])
    assert torch.equal(control_indices(labels, 7), reference)
    assert torch.equal(control_indices(labels, 7, None), torch.arange(300))


# -- hf: --------------------------------------------------------------------------------------------

def test_a_data_set_saved_to_disk_reads_through_hf(tmp_path):
    save_hf(tmp_path / "pets", {"train": 4, "test": 2})
    source = parse_source(f"hf:{tmp_path / 'pets'}")
    assert source.splits() == ["train", "test"]
    train = source.split("train")
    assert train.class_names == ("tabby_cat", "dog", "fox") and train.labels.tolist() == [0, 1, 2] * 4
    task = open_task("pets", f"hf:{tmp_path / 'pets'}", classes={"tabby_cat": "tabby"})
    assert task.prompts(train) == ("a photo of a tabby.", "a photo of a dog.", "a photo of a fox.")
    x = train.decode([0, 5], size=32)
    assert x.shape == (2, 3, 32, 32) and x.dtype == torch.uint8


def test_only_the_sampled_probes_and_evaluated_images_are_decoded(tmp_path, decoded):
    from platonic.experiments.setups import ExperimentConfig, read_task

    save_hf(tmp_path / "big", {"train": 100, "test": 5})  # 300 train images, 15 test images
    config = ExperimentConfig(models={"a": "x", "b": "y"}, tasks={"big": {"data": f"hf:{tmp_path / 'big'}"}},
                              sources={"a": {"big": "f"}, "b": {"big": "g"}}, probes_per_class=2, max_test_per_class=3)
    spec, (train, labels) = read_task("big", config.tasks["big"], 32, config)
    assert spec.probes.shape == (6, 3, 32, 32) and len(spec.test.labels) == 9
    assert len(decoded) == 6 + 9, "only the 6 probes and the 9 evaluated test images are decoded"
    assert len(train) == 300 and len(labels) == 300  # the train split is there, undecoded
    batch = train[torch.tensor([5, 17])]  # a fine-tune's batch decodes its own rows only
    assert batch.shape == (2, 3, 32, 32) and len(decoded) == 17
    # the probes are the paper's draw from the train split, decoded the paper's way
    rows = probe_draw(300, 3, 2)
    split = parse_source(f"hf:{tmp_path / 'big'}").split("train")
    assert torch.equal(spec.probes, split.decode(rows, 32))


def test_bad_hf_data_sets_are_one_line_errors(tmp_path):
    save_hf(tmp_path / "unlabelled", {"train": 2}, label=False)
    with pytest.raises(InvalidInputError, match="has no label column .*columns: image, caption"):
        parse_source(f"hf:{tmp_path / 'unlabelled'}").split("train")
    save_hf(tmp_path / "trainonly", {"train": 2, "validation": 1})
    with pytest.raises(InvalidInputError, match=r"has no test split \(it has: train, validation\)"):
        parse_source(f"hf:{tmp_path / 'trainonly'}").split("test")
    with pytest.raises(InvalidInputError, match="cannot load the Hugging Face data set hf:nobody/no-such-set") as info:
        parse_source("hf:nobody/no-such-set").splits()  # offline in tests: fails fast, no download
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidInputError, match="no such directory"):
        parse_source(f"hf:{tmp_path / 'missing'}").splits()
    with pytest.raises(InvalidInputError, match="has 3 classes, the registry's eurosat has 10"):
        task = open_task("eurosat", f"hf:{tmp_path / 'trainonly'}")
        task.prompts(task.split("train"))


def test_a_single_split_is_cut_80_20_with_seed_42(tmp_path):
    save_hf(tmp_path / "one", {"train": 10})
    ds = datasets.load_from_disk(str(tmp_path / "one"))["train"]
    ds.save_to_disk(str(tmp_path / "single"))  # a Dataset, not a DatasetDict
    source = parse_source(f"hf:{tmp_path / 'single'}")
    order = torch.randperm(30, generator=torch.Generator().manual_seed(42))
    train, test = task_split(source, "train"), task_split(source, "test")
    whole = source.split(source.splits()[0]).labels
    assert torch.equal(train.labels, whole[order[:24]]) and torch.equal(test.labels, whole[order[24:]])
    assert task_split(source, "val") is None


# -- torchvision: ----------------------------------------------------------------------------------

def write_fake_mnist(root, n_train=40, n_test=20):
    """ROOT/MNIST/raw/*-idx?-ubyte: the files torchvision.datasets.MNIST reads (download=False)."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        pixels = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g)
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 2051, n, 28, 28) + pixels.numpy().tobytes())
        labels = (torch.arange(n) % 10).to(torch.uint8)
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, n) + labels.numpy().tobytes())
    return root


def test_a_torchvision_data_set_on_a_fake_root(tmp_path):
    write_fake_mnist(tmp_path / "mnist")
    task = open_task("mnist", f"torchvision:MNIST@{tmp_path / 'mnist'}")
    train, test = task.split("train"), task.split("test")
    assert len(train) == 40 and len(test) == 20 and train.labels[:3].tolist() == [0, 1, 2]
    assert task.prompts(train)[3] == "a photo of the number 3."  # the registry's names, not "3 - three"
    assert train.decode([0, 1], 32).shape == (2, 3, 32, 32)
    with pytest.raises(InvalidInputError, match="has no val split"):
        task.source.split("val")
    with pytest.raises(InvalidInputError, match="torchvision.datasets has no data set class 'Nope'"):
        parse_source(f"torchvision:Nope@{tmp_path}")
    with pytest.raises(InvalidInputError, match=r"cannot read torchvision:CIFAR100@.*\(train split\)"):
        parse_source(f"torchvision:CIFAR100@{tmp_path}").split("train")


# -- folders, the YAML field and the command line ------------------------------------------------------

def test_an_image_folder_still_reads_as_before(tmp_path):
    for split, n in (("train", 3), ("test", 2)):
        for c in ("sky_blue", "navy"):
            (tmp_path / split / c).mkdir(parents=True)
            for i in range(n):
                _picture(40 * i + 1).save(tmp_path / split / c / f"{i}.png")
    task = open_task("blues", tmp_path)
    train = task.split("train")
    assert task.prompts(train) == ("a photo of a navy.", "a photo of a sky blue.")
    assert train.labels.tolist() == [0, 0, 0, 1, 1, 1] and len(task.split("test")) == 4
    assert task.split("val") is None


def test_registered_tasks_by_name_in_yaml_and_on_the_command_line(tmp_path):
    from platonic.experiments.setups import config_from_options, read_config

    save_hf(tmp_path / "pets", {"train": 2, "test": 1})
    (tmp_path / "setup.yaml").write_text(
        "models: {a: x, b: y}\nsources: {a: {eurosat: f, pets: f, dtd: f}, b: {eurosat: g, pets: g, dtd: g}}\n"
        "tasks: {eurosat: {data: 'hf:tanganke/eurosat'}, pets: {data: 'hf:pets'}, dtd: }\n")
    config = read_config(tmp_path / "setup.yaml")
    assert config.tasks["eurosat"].data == "hf:tanganke/eurosat" and config.tasks["dtd"].data is None
    assert config.tasks["pets"].data == f"hf:{tmp_path / 'pets'}"  # a local hf: path, read from the YAML's folder
    cli = config_from_options(["a=x", "b=y"], ["eurosat", f"pets=hf:{tmp_path / 'pets'}"], ["cifar100"],
                              ["a/eurosat=f", "b/eurosat=g", "a/pets=f", "b/pets=g"])
    assert cli.tasks["eurosat"].data is None and cli.controls["cifar100"].data is None
    with pytest.raises(InvalidInputError, match="unknown task 'pets'; the registry knows"):
        config_from_options(["a=x", "b=y"], ["pets"], [], [])


def test_the_papers_preprocessing(tmp_path):
    from torchvision import transforms as T

    from platonic.models.constants import OPENAI_MEAN, OPENAI_STD
    from platonic.models.images import to_model_input

    img = Image.fromarray(torch.randint(0, 256, (300, 400, 3), dtype=torch.uint8,
                                        generator=torch.Generator().manual_seed(1)).numpy())
    reference = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(OPENAI_MEAN, OPENAI_STD)])(img)
    std, mean = torch.tensor(OPENAI_STD).view(3, 1, 1), torch.tensor(OPENAI_MEAN).view(3, 1, 1)
    expected = ((reference * std + mean).clamp(0, 1) * 255).to(torch.uint8)  # pta/features.py: truncated
    assert torch.equal(data_images.paper_canonical(img), expected)
    probes = expected[None]
    x = to_model_input(probes, 112, (0, 0, 0), (1, 1, 1))
    plain = torch.nn.functional.interpolate(probes.float() / 255, size=(112, 112), mode="bilinear", align_corners=False)
    assert torch.allclose(x, plain)  # each model's own resize: plain bilinear, no antialiasing
