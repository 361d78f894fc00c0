"""Content-hash cache: each item embedded once, crash-safe writes; then embed_content end to end.

The cache tests use a hash-based stand-in encoder (plumbing only); the embed_content tests use
the real packaged models.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from PIL import Image

from hier_pipeline.content import (
    ContentConfig,
    EmbeddingCache,
    EncodeResult,
    Encoders,
    ImageEncoder,
    TextEncoder,
    embed_content,
)
from hier_pipeline.files.atomic import partial_files

DIM = 8


class HashEncoder:
    """Deterministic vectors from a hash; records what it was asked to encode."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def __call__(self, items: list[bytes]) -> EncodeResult:
        self.seen.extend(items)
        rows = [np.frombuffer(hashlib.sha256(x).digest()[:DIM], np.uint8) for x in items]
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(items), DIM)
        ok = np.array([not x.startswith(b"bad") for x in items], dtype=bool)
        vectors[~ok] = 0
        return EncodeResult(vectors, ok, [None if k else "unreadable" for k in ok])


def _items(n: int, prefix: str = "item") -> list[bytes]:
    return [f"{prefix} {i}".encode() for i in range(n)]


def test_second_run_embeds_nothing_and_returns_the_same_vectors(tmp_path: Path) -> None:
    items = _items(200)
    first, stats1 = EmbeddingCache(tmp_path, "enc/v1", DIM).get_or_compute(items, HashEncoder())
    assert (stats1.hits, stats1.misses) == (0, 200)
    encoder = HashEncoder()
    second, stats2 = EmbeddingCache(tmp_path, "enc/v1", DIM).get_or_compute(items, encoder)
    assert (stats2.hits, stats2.misses, encoder.seen) == (200, 0, [])
    np.testing.assert_array_equal(first.vectors, second.vectors)


def test_one_percent_new_items_embeds_only_those(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, "enc/v1", DIM)
    cache.get_or_compute(_items(1000), HashEncoder())
    encoder = HashEncoder()
    grown = _items(1000) + _items(10, "new")
    result, stats = cache.get_or_compute(grown, encoder)
    assert stats.misses == 10
    assert sorted(encoder.seen) == sorted(_items(10, "new"))
    np.testing.assert_array_equal(result.vectors, HashEncoder()(grown).vectors)


def test_duplicates_are_encoded_once_and_failures_are_not_cached(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, "enc/v1", DIM)
    encoder = HashEncoder()
    result, stats = cache.get_or_compute([b"a", b"bad", b"a", b"b"], encoder)
    assert encoder.seen == [b"a", b"bad", b"b"]
    assert (stats.items, stats.unique, stats.misses, stats.failed) == (4, 3, 3, 1)
    assert result.ok.tolist() == [True, False, True, True]
    assert result.reasons == [None, "unreadable", None, None]
    _, again = cache.get_or_compute([b"bad"], HashEncoder())
    assert again.misses == 1  # retried next run: the file may have been fixed


def test_encoder_versions_do_not_share_vectors(tmp_path: Path) -> None:
    EmbeddingCache(tmp_path, "enc/v1", DIM).get_or_compute(_items(5), HashEncoder())
    _, stats = EmbeddingCache(tmp_path, "enc/v2", DIM).get_or_compute(_items(5), HashEncoder())
    assert stats.misses == 5


def test_crash_while_writing_leaves_a_readable_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = EmbeddingCache(tmp_path, "enc/v1", DIM)
    cache.get_or_compute(_items(50), HashEncoder())

    def crash_half_way(table: object, where: io.BufferedWriter, **kwargs: object) -> None:
        where.write(b"PAR1 half a segment")
        raise KeyboardInterrupt  # the process dies mid-write

    with monkeypatch.context() as mp:
        mp.setattr(pq, "write_table", crash_half_way)
        with pytest.raises(KeyboardInterrupt):
            cache.get_or_compute(_items(60), HashEncoder())
    assert len(cache.segments()) == 1
    assert not partial_files(cache.folder)
    _, stats = cache.get_or_compute(_items(60), HashEncoder())
    assert (stats.hits, stats.misses) == (50, 10)


def test_damaged_segment_is_quarantined_and_recomputed(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, "enc/v1", DIM)
    cache.get_or_compute(_items(20), HashEncoder())
    cache.get_or_compute(_items(30), HashEncoder())  # second segment holds items 20..29
    damaged = cache.segments()[1]
    damaged.write_bytes(damaged.read_bytes()[:100])
    _, stats = cache.get_or_compute(_items(30), HashEncoder())
    assert (stats.hits, stats.misses) == (20, 10)
    assert damaged.with_suffix(".corrupt").exists()


def test_compaction_merges_segments_without_losing_vectors(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, "enc/v1", DIM, max_segments=3)
    for n in range(1, 6):
        cache.get_or_compute(_items(10 * n), HashEncoder())
    assert len(cache.segments()) <= 3
    result, stats = cache.get_or_compute(_items(50), HashEncoder())
    assert stats.misses == 0
    np.testing.assert_array_equal(result.vectors, HashEncoder()(_items(50)).vectors)


# embed_content with the real models


@pytest.fixture(scope="module")
def encoders() -> tuple[TextEncoder, ImageEncoder]:
    return TextEncoder(), ImageEncoder()


def _catalogue(image_dir: Path, n: int = 100) -> pd.DataFrame:
    """n products: titles for all but #3; image paths for the first 7 (p3 = p0 byte for byte,
    p4 not an image, gone.png missing, one path escaping the folder)."""
    colours = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]
    for i in range(4):
        Image.new("RGB", (64, 48), colours[i % 3]).save(image_dir / f"p{i}.png")
    (image_dir / "p4.png").write_bytes(b"not an image")
    images = ["p0.png", "p1.png", "p2.png", "p3.png", "p4.png", "gone.png", "../secret.png"]
    return pd.DataFrame(
        {
            "product_id": [f"P{i}" for i in range(n)],
            "title": [None if i == 3 else f"product {i} running shoe" for i in range(n)],
            "brand": [f"brand {i % 7}" if i % 2 else np.nan for i in range(n)],
            "image": images + [None] * (n - len(images)),
        }
    )


def test_embed_content_reuses_the_cache_and_reports_missing_content(
    tmp_path: Path, encoders: tuple[TextEncoder, ImageEncoder]
) -> None:
    (tmp_path / "images").mkdir()
    frame = _catalogue(tmp_path / "images")
    config = ContentConfig(
        id_column="product_id",
        text_columns=("title", "brand"),
        image_column="image",
        image_dir=tmp_path / "images",
        cache_dir=tmp_path / "cache",
    )
    first = embed_content(frame, config, Encoders(*encoders))
    assert first.text.shape == (100, 384)
    assert first.image.shape == (100, 1280)
    assert first.has_text.all()  # #3 still has a brand
    assert first.has_image.tolist()[:8] == [True] * 4 + [False] * 4
    assert set(first.image_errors) == {"P4", "P5", "P6"}
    assert "outside the image folder" in first.image_errors["P6"]
    assert not first.image[~first.has_image].any()
    assert first.text_stats.misses == 100
    assert (first.image_stats.items, first.image_stats.misses) == (5, 4)  # p3 is a copy of p0

    second = embed_content(frame, config)  # fresh encoders load lazily, only for misses
    assert (second.text_stats.misses, second.image_stats.misses) == (0, 1)  # p4 is retried
    np.testing.assert_array_equal(first.text, second.text)
    np.testing.assert_array_equal(first.image, second.image)

    new = {"product_id": "P100", "title": "a new trail shoe", "brand": None, "image": None}
    grown = pd.concat([frame, pd.DataFrame([new])], ignore_index=True)
    third = embed_content(grown, config, Encoders(*encoders))
    assert third.text_stats.misses == 1
    np.testing.assert_array_equal(third.text[:100], first.text)


def test_entities_without_text_get_mask_false_and_zero_rows(
    encoders: tuple[TextEncoder, ImageEncoder],
) -> None:
    frame = pd.DataFrame({"id": [1, 2], "title": ["shoe", "  "], "note": [None, pd.NA]})
    out = embed_content(frame, ContentConfig(text_columns=("title", "note")), Encoders(*encoders))
    assert out.has_text.tolist() == [True, False]
    assert not out.text[1].any()
    assert not out.has_image.any()
