"""Content vectors for a table of entities: joined text columns and an optional image file.

Masks, not vectors, say what content an entity has. A row with ``has_text`` / ``has_image`` False
holds zeros only as a placeholder: the model substitutes its learned "no content" vector there,
and a zero row must never be used without its mask.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hier_pipeline.content.cache import CacheStats, EmbeddingCache, EncodeResult
from hier_pipeline.content.image_encoder import (
    ImageEncoder,
    ImageEncoderConfig,
    ImageError,
    image_cache_id,
    read_image_file,
    shown_path,
)
from hier_pipeline.content.text_encoder import TextEncoder, TextEncoderConfig, text_cache_id


@dataclass(frozen=True)
class ContentConfig:
    """Which columns hold content, where images live, and where the embedding cache is kept.

    ``image_column`` values are paths relative to ``image_dir``; paths escaping it are refused.
    ``cache_dir`` None means a throwaway cache: duplicates are still encoded once per call.
    """

    id_column: str = "id"
    text_columns: tuple[str, ...] = ()
    image_column: str | None = None
    image_dir: Path | None = None
    cache_dir: Path | None = None
    image_chunk: int = 1024  # image files held in memory at once
    text: TextEncoderConfig = field(default_factory=TextEncoderConfig)
    image: ImageEncoderConfig = field(default_factory=ImageEncoderConfig)


@dataclass
class ContentEmbeddings:
    """Per-entity content vectors, aligned with ``ids``; zero rows where the mask is False."""

    ids: np.ndarray
    text: np.ndarray  # (N, 384) float32, unit rows where has_text
    image: np.ndarray  # (N, 1280) float32, unit rows where has_image
    has_text: np.ndarray
    has_image: np.ndarray
    image_errors: dict[str, str]  # entity id -> why its image gave no vector (no path: no entry)
    text_stats: CacheStats
    image_stats: CacheStats


def join_text(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """'col: value; col: value' per row, skipping nulls and blanks ('' when nothing is left)."""
    parts: list[list[str]] = [[] for _ in range(len(frame))]
    for col in columns:
        for row, value in enumerate(frame[col].tolist()):
            text = "" if _is_null(value) else str(value).strip()
            if text:
                parts[row].append(f"{col}: {text}")
    return ["; ".join(p) for p in parts]


@dataclass
class Encoders:
    """The text and image encoders, each loaded on its first need and then kept: whatever embeds
    several tables, or batch after batch (the resident arrivals worker), loads each once (MiniLM
    takes about a second). One holder serves one `ContentConfig`'s encoder settings."""

    text: TextEncoder | None = None
    image: ImageEncoder | None = None


def embed_content(
    frame: pd.DataFrame, config: ContentConfig, encoders: Encoders | None = None
) -> ContentEmbeddings:
    """Embed every entity's text and image, encoding only content the cache has not seen.

    Encoders not held yet are loaded on first need, so a fully cached run loads no model.
    """
    held = encoders if encoders is not None else Encoders()
    n = len(frame)
    ids = frame[config.id_column].to_numpy()
    out = ContentEmbeddings(
        ids=ids,
        text=np.zeros((n, TextEncoder.dim), dtype=np.float32),
        image=np.zeros((n, ImageEncoder.dim), dtype=np.float32),
        has_text=np.zeros(n, dtype=bool),
        has_image=np.zeros(n, dtype=bool),
        image_errors={},
        text_stats=CacheStats(),
        image_stats=CacheStats(),
    )

    def encode_text(batch: list[bytes]) -> EncodeResult:
        held.text = held.text or TextEncoder(config.text)
        return held.text.encode_items(batch)

    def encode_images(batch: list[bytes], names: dict[bytes, str]) -> EncodeResult:
        held.image = held.image or ImageEncoder(config.image)
        return held.image.encode_items(batch, [names[b] for b in batch])

    with tempfile.TemporaryDirectory() as scratch:
        root = config.cache_dir or Path(scratch)
        texts = join_text(frame, config.text_columns)
        rows = [i for i, t in enumerate(texts) if t]
        if rows:
            cache = EmbeddingCache(root, text_cache_id(config.text), TextEncoder.dim)
            result, out.text_stats = cache.get_or_compute(
                [texts[i].encode("utf-8") for i in rows], encode_text
            )
            out.text[rows], out.has_text[rows] = result.vectors, result.ok
        if config.image_column is None:
            return out
        cache = EmbeddingCache(root, image_cache_id(), ImageEncoder.dim)
        base = (config.image_dir or Path.cwd()).resolve()
        values = frame[config.image_column].tolist()
        rows = [i for i, v in enumerate(values) if not _is_null(v) and str(v).strip()]
        names: dict[bytes, str] = {}
        for start in range(0, len(rows), config.image_chunk):
            kept, items = [], []
            names.clear()
            for i in rows[start : start + config.image_chunk]:
                try:
                    path = _resolve_inside(str(values[i]).strip(), base)
                    data = read_image_file(path, config.image.max_file_bytes)
                except ImageError as err:
                    out.image_errors[str(ids[i])] = str(err)
                    continue
                kept.append(i)
                items.append(data)
                names.setdefault(data, str(path))
            result, stats = cache.get_or_compute(items, lambda b: encode_images(b, names))
            out.image[kept], out.has_image[kept] = result.vectors, result.ok
            for i, reason in zip(kept, result.reasons, strict=True):
                if reason is not None:
                    out.image_errors[str(ids[i])] = reason
            out.image_stats.add(stats)
    return out


def _resolve_inside(relative: str, base: Path) -> Path:
    """``base / relative`` resolved, refusing paths that escape ``base`` (../, absolute, links)
    and values that are no path at all (a NUL byte, a loop of links), so one hostile cell costs
    one image, not the run."""
    shown = shown_path(relative)
    try:
        path = (base / relative).resolve()
    except (OSError, ValueError, RuntimeError) as err:  # RuntimeError: a link loop (Python 3.11)
        raise ImageError(f"{shown!r}: not a usable path ({err})") from err
    if not path.is_relative_to(base):
        raise ImageError(f"{shown}: outside the image folder {base}")
    return path


def _is_null(value: object) -> bool:
    """None, NaN, NaT and pd.NA; never raises on list-like cells."""
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))
