"""Real architectures with random weights, for the tests in this folder: open_clip (pretrained=None) and
tiny transformers configs (`tiny_hf`), each built once per session (`get_model`).

No network: open_clip's CLIP towers use its bundled BPE tokenizer; the transformers models get a
tokenizer built here from the same bundled BPE vocabulary. Tests import these from here, not from
`conftest` (several test folders have one, and which is `conftest` in sys.modules depends on the order).
"""

import logging
import warnings

import torch

from platonic.models import load_model
from platonic.models.hf_backend import from_config

VOCAB = 49408  # open_clip's bundled BPE vocabulary
SMALL_TEXT = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=32)
SMALL_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, patch_size=8)
# open_clip's ViT-S-32 config at a test's size: the same classes (VisionTransformer, TextTransformer, packed
# nn.MultiheadAttention), two blocks of width 64 a tower, 64 px images in 16 patches
TINY_OPEN_CLIP_VIT = {"embed_dim": 64, "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "head_width": 32,
                                                      "patch_size": 16},
                      "text_cfg": {"context_length": 77, "vocab_size": VOCAB, "width": 64, "heads": 2, "layers": 2}}


class BPETokenizer:
    """open_clip's bundled SimpleTokenizer as a texts -> {input_ids, attention_mask} callable."""

    def __init__(self, context_length=16):
        from open_clip.tokenizer import SimpleTokenizer

        self.tok = SimpleTokenizer(context_length=context_length)

    def __call__(self, texts):
        ids = self.tok(texts)
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}


def clip_tokenizer():
    """A transformers CLIPTokenizer (savable, like a hub model's) built from open_clip's bundled BPE vocabulary."""
    import gzip

    from open_clip.tokenizer import SimpleTokenizer, default_bpe
    from transformers import CLIPTokenizer

    vocab = dict(SimpleTokenizer().encoder)
    vocab["<|startoftext|>"], vocab["<|endoftext|>"] = vocab.pop("<start_of_text>"), vocab.pop("<end_of_text>")
    merges = gzip.open(default_bpe()).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
    return CLIPTokenizer(vocab=vocab, merges=[tuple(m.split()) for m in merges])


def tiny_hf(kind: str, tokenizer=None):
    from transformers import ClapConfig, CLIPConfig, Siglip2Config, SiglipConfig

    configs = {
        "clip": lambda: CLIPConfig(text_config={**SMALL_TEXT, "eos_token_id": 49407, "bos_token_id": 49406},
                                   vision_config={**SMALL_VISION, "image_size": 32}, projection_dim=24),
        "siglip": lambda: SiglipConfig(text_config=SMALL_TEXT, vision_config={**SMALL_VISION, "image_size": 32}),
        "siglip2": lambda: Siglip2Config(text_config=SMALL_TEXT, vision_config={**SMALL_VISION, "num_patches": 16}),
        "clap": lambda: ClapConfig(text_config={**SMALL_TEXT, "max_position_embeddings": 40},
                                   audio_config=dict(depths=[1, 1], num_attention_heads=[2, 2], patch_embeds_hidden_size=16,
                                                     hidden_size=32), projection_dim=24),
    }
    return from_config(configs[kind](), spec=f"hf:tiny-{kind}", tokenizer=tokenizer or BPETokenizer())


def tiny_open_clip_dir(directory) -> str:
    """An open_clip CLIP of `TINY_OPEN_CLIP_VIT`'s sizes with random weights (seed 0), written as an open_clip local
    directory as open_clip's `save_for_hf` writes one (open_clip_config.json, open_clip_model.safetensors; no
    tokenizer files, so open_clip uses its bundled BPE tokenizer). Returns its spec, `open_clip:local-dir:DIR`."""
    from pathlib import Path

    from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD
    from open_clip.model import CLIP
    from open_clip.push_to_hf_hub import save_config_for_hf
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = CLIP(**TINY_OPEN_CLIP_VIT)
    model.visual.image_mean, model.visual.image_std = OPENAI_DATASET_MEAN, OPENAI_DATASET_STD  # as create_model sets them
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "open_clip_model.safetensors"))
    save_config_for_hf(model, directory / "open_clip_config.json", model_config=TINY_OPEN_CLIP_VIT)
    return f"open_clip:local-dir:{directory}"


_MODELS = {}


def get_model(spec: str):
    """Cached across the session: each architecture is built once."""
    if spec not in _MODELS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)
            try:
                torch.manual_seed(0)  # random weights, but the same ones in every run
                _MODELS[spec] = tiny_hf(spec.removeprefix("hf:tiny-")) if spec.startswith("hf:tiny-") else load_model(spec)
            finally:
                logging.disable(logging.NOTSET)
    return _MODELS[spec]


