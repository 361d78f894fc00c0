"""The content stage over a whole database: every table with text or image columns gets vectors,
aligned with its graph nodes (rows in `__row` order), saved as plain tensors."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from hier_pipeline.content.embed import ContentConfig, ContentEmbeddings, embed_content
from hier_pipeline.content.image_encoder import ImageEncoder
from hier_pipeline.content.text_encoder import TextEncoder
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.dataset.sql import open_database, quote


@dataclass(frozen=True)
class TableContent:
    rows: int
    with_text: int
    with_image: int
    image_errors: int
    text_hits: int
    text_misses: int
    image_hits: int
    image_misses: int
    seconds: float


@dataclass(frozen=True)
class ContentArtifact:
    path: Path
    tables: dict[str, TableContent] = field(default_factory=dict)

    def load(self) -> dict[str, dict[str, torch.Tensor]]:
        """table -> {"text", "image", "has_text", "has_image"} tensors, rows in node order."""
        loaded: dict[str, dict[str, torch.Tensor]] = torch.load(self.path, weights_only=True)
        return loaded


def content_tables(spec: DatasetSpec) -> list[str]:
    return [t.name for t in spec.file_tables() if t.text or t.image]


def embed_tables(spec: DatasetSpec, database: Path, cache_dir: Path, path: Path) -> ContentArtifact:
    """Embed every content table (reusing the cache), save the vectors, and describe what happened."""
    text_encoder: TextEncoder | None = None
    image_encoder: ImageEncoder | None = None
    vectors: dict[str, dict[str, torch.Tensor]] = {}
    summary: dict[str, TableContent] = {}
    for name in content_tables(spec):
        table = spec.tables[name]
        columns = [*table.text, *([table.image] if table.image else [])]
        with open_database(database) as connection:
            frame = connection.execute(
                f"SELECT __row, {', '.join(quote(c) for c in columns)} FROM raw.{quote(name)} ORDER BY __row"
            ).fetchdf()
        config = ContentConfig(
            id_column="__row",
            text_columns=table.text,
            image_column=table.image,
            image_dir=spec.root,
            cache_dir=cache_dir,
        )
        embedded = embed_content(frame, config, text_encoder, image_encoder)
        vectors[name] = _tensors(embedded, with_image=table.image is not None)
        summary[name] = TableContent(
            rows=len(frame),
            with_text=int(embedded.has_text.sum()),
            with_image=int(embedded.has_image.sum()),
            image_errors=len(embedded.image_errors),
            text_hits=embedded.text_stats.hits,
            text_misses=embedded.text_stats.misses,
            image_hits=embedded.image_stats.hits,
            image_misses=embedded.image_stats.misses,
            seconds=round(embedded.text_stats.seconds + embedded.image_stats.seconds, 3),
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    torch.save(vectors, partial)
    os.replace(partial, path)
    return ContentArtifact(path, summary)


def _tensors(embedded: ContentEmbeddings, *, with_image: bool) -> dict[str, torch.Tensor]:
    tensors = {
        "text": torch.from_numpy(embedded.text),
        "has_text": torch.from_numpy(embedded.has_text),
    }
    if with_image:
        tensors["image"] = torch.from_numpy(embedded.image)
        tensors["has_image"] = torch.from_numpy(embedded.has_image)
    return tensors


def normalisation_errors(
    vectors: dict[str, dict[str, torch.Tensor]], tolerance: float = 1e-3
) -> dict[str, int]:
    """Rows per `table/modality` that are not finite, not unit length where present, or not zero
    where absent (a zero row must never pass for a real vector)."""
    errors: dict[str, int] = {}
    for table, tensors in vectors.items():
        for modality in ("text", "image"):
            if modality not in tensors:
                continue
            values, present = tensors[modality], tensors[f"has_{modality}"]
            norms = values.norm(dim=1)
            bad = ~torch.isfinite(values).all(dim=1)
            bad |= present & ((norms - 1).abs() > tolerance)
            bad |= ~present & (norms != 0)
            if int(bad.sum()):
                errors[f"{table}/{modality}"] = int(bad.sum())
    return errors


def coverage(vectors: dict[str, dict[str, torch.Tensor]]) -> dict[str, float]:
    return {
        f"{table}/{modality}": float(np.round(tensors[f"has_{modality}"].float().mean().item(), 4))
        for table, tensors in vectors.items()
        for modality in ("text", "image")
        if modality in tensors
    }
