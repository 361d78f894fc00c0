"""The content stage over a whole database: every table with text or image columns gets vectors,
aligned with its graph nodes (rows in `__row` order), saved as plain tensors."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from hier_pipeline.content.embed import ContentConfig, ContentEmbeddings, Encoders, embed_content
from hier_pipeline.content.text_encoder import text_char_limit
from hier_pipeline.dataset.spec import DatasetSpec, TableSpec
from hier_pipeline.dataset.sql import open_database, quote
from hier_pipeline.files.atomic import atomic_path


@dataclass(frozen=True)
class TableContent:
    rows: int
    with_text: int
    with_image: int
    image_errors: int
    text_clipped: int  # rows with a text value longer than the encoder reads, clipped on read
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


def embed_tables(
    spec: DatasetSpec,
    database: Path,
    cache_dir: Path,
    path: Path,
    encoders: Encoders | None = None,
) -> ContentArtifact:
    """Embed every content table (reusing the cache, and the encoders across tables), save the
    vectors, and describe what happened."""
    encoders = encoders if encoders is not None else Encoders()
    vectors: dict[str, dict[str, torch.Tensor]] = {}
    summary: dict[str, TableContent] = {}
    for name in content_tables(spec):
        table = spec.tables[name]
        config = ContentConfig(
            id_column="__row",
            text_columns=table.text,
            image_column=table.image,
            image_dir=spec.root,
            cache_dir=cache_dir,
        )
        frame, clipped = _read_content(database, table, text_char_limit(config.text))
        embedded = embed_content(frame, config, encoders)
        vectors[name] = _tensors(embedded, with_image=table.image is not None)
        summary[name] = TableContent(
            rows=len(frame),
            with_text=int(embedded.has_text.sum()),
            with_image=int(embedded.has_image.sum()),
            image_errors=len(embedded.image_errors),
            text_clipped=clipped,
            text_hits=embedded.text_stats.hits,
            text_misses=embedded.text_stats.misses,
            image_hits=embedded.image_stats.hits,
            image_misses=embedded.image_stats.misses,
            seconds=round(embedded.text_stats.seconds + embedded.image_stats.seconds, 3),
        )
    with atomic_path(path) as partial:
        torch.save(vectors, partial)
    return ContentArtifact(path, summary)


def _read_content(database: Path, table: TableSpec, char_limit: int) -> tuple[pd.DataFrame, int]:
    """The table's content columns in node (`__row`) order, and how many rows had a text value
    clipped to `char_limit`. Clipping in DuckDB, before the rows reach Python, keeps a hostile
    gigabyte-long description from being held whole; the encoder never reads past the limit."""
    with open_database(database) as connection:
        described = connection.execute(f"DESCRIBE raw.{quote(table.name)}").fetchall()
        types = {str(row[0]): str(row[1]) for row in described}
        long_texts = [c for c in table.text if types[c] == "VARCHAR"]
        selected = [
            f"left({quote(c)}, {char_limit}) AS {quote(c)}" if c in long_texts else quote(c)
            for c in table.text
        ]
        if table.image:
            selected.append(quote(table.image))
        too_long = " OR ".join(f"length({quote(c)}) > {char_limit}" for c in long_texts)
        frame = connection.execute(
            f"SELECT __row, {', '.join(selected)}, coalesce({too_long or 'false'}, false) AS __clipped"
            f" FROM raw.{quote(table.name)} ORDER BY __row"
        ).fetchdf()
    return frame.drop(columns="__clipped"), int(frame["__clipped"].sum())


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
