"""The caption cache both worlds' builders write: the frozen sentence encoder's embeddings of a vocabulary."""

from __future__ import annotations

from pathlib import Path

import torch

from ...storage import write_tensors
from .text import SentenceEncoder


def write_caption_embeddings(path: Path, vocab: list[str], key: str) -> None:
    """Write path/captions.safetensors: "embeddings" (V, 384), the MiniLM embeddings of `vocab` (the JSON list
    in its metadata under `key`), from a fresh encoder on one thread, so they depend on the vocabulary alone."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        emb = SentenceEncoder().encode(vocab)
    finally:
        torch.set_num_threads(threads)
    write_tensors(Path(path) / "captions.safetensors", {"embeddings": emb}, {"vocab": vocab}, key=key, make_parents=True)
