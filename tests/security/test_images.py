"""Image files that are not images, or are built to exhaust memory when decoded, cost one image
each: reported with the file's name in `image_errors`, never raised, never decoded in full."""

from __future__ import annotations

import io
import resource
import struct
import zlib
from pathlib import Path

import pandas as pd
from PIL import Image

from hier_pipeline.content import ContentConfig, embed_content
from hier_pipeline.content.image_encoder import ImageEncoderConfig
from tests.builders import png_bytes, png_claiming


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_with_text_bomb(megabytes: int) -> bytes:
    """A valid 8x8 PNG carrying a compressed text chunk that inflates to `megabytes` MB."""
    png = png_bytes(Image.new("RGB", (8, 8)))
    bomb = _chunk(b"zTXt", b"comment\0\0" + zlib.compress(b"\0" * (megabytes << 20), 9))
    return png[:33] + bomb + png[33:]  # after the signature and IHDR, before the pixels


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_hostile_image_files_are_reported_not_raised(tmp_path: Path) -> None:
    good = png_bytes(Image.new("RGB", (64, 64), (10, 200, 10)))
    jpeg = io.BytesIO()
    Image.new("RGB", (256, 256), (200, 10, 10)).save(jpeg, "JPEG")
    files = {
        "good.png": good,
        "table.png": b"name,price\nshoe,10\n",
        "pixel_bomb.png": png_claiming(30_000, 30_000),  # 900 M pixels: Pillow's own bomb error
        "over_limit.png": png_claiming(8_000, 8_000),  # 64 M pixels: over our 50 M limit
        "text_bomb.png": _png_with_text_bomb(64),  # 64 KB on disk
        "cut.jpg": jpeg.getvalue()[:300],
        "oversized.png": good + b"\0" * 200_000,
        "empty.png": b"",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    frame = pd.DataFrame({"id": list(files), "image": list(files)})
    config = ContentConfig(
        image_column="image",
        image_dir=tmp_path,
        cache_dir=tmp_path / "cache",
        image=ImageEncoderConfig(max_file_bytes=100_000),
    )
    before = _peak_rss_mb()
    out = embed_content(frame, config)
    assert out.has_image.tolist() == [True] + [False] * (len(files) - 1)
    assert set(out.image_errors) == set(files) - {"good.png"}
    for name, reason in out.image_errors.items():
        assert reason.startswith(str(tmp_path / name)), reason
    assert "over the 50000000 limit" in out.image_errors["over_limit.png"]
    assert "over the 100000-byte limit" in out.image_errors["oversized.png"]
    assert "Decompressed data too large" in out.image_errors["text_bomb.png"]
    assert _peak_rss_mb() - before < 600  # the model; never 900 M pixels or 64 MB of text
