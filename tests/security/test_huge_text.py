"""Huge text fields cost bounded memory: a CSV line past the reader's limit is quarantined with its
own reason, and long texts that load are clipped, on read and counted, to what the encoder reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hier_pipeline.content.tables import embed_tables
from hier_pipeline.content.text_encoder import TextEncoder, TextEncoderConfig, text_char_limit
from hier_pipeline.dataset import load_dataset, parse_dataset
from hier_pipeline.dataset.sql import MAX_CSV_LINE_BYTES, open_database
from tests.builders import TINY_FILES, write_dataset

SNIFFED_ROWS = 20_480  # DuckDB's type sniffer reads this many rows before loading


def test_a_line_past_the_limit_is_quarantined_with_a_count(tmp_path: Path) -> None:
    filler = "".join(f"{i},200,item {i},1.0,2024-01-01\n" for i in range(100, 100 + SNIFFED_ROWS))
    huge = "99,200," + "x" * (MAX_CSV_LINE_BYTES + 1) + ",5.0,2024-01-01\n"
    products = TINY_FILES["products.csv"] + filler + huge + "98,200,tea,3.0,2024-01-02\n"
    folder = write_dataset(tmp_path / "d", files={"products.csv": products})
    report = load_dataset(parse_dataset(folder), tmp_path / "raw.duckdb")
    table = report.tables["products"]
    assert table.quarantined_by_reason == {"csv_line_too_long": 1}
    assert (table.read, table.accepted) == (SNIFFED_ROWS + 5, SNIFFED_ROWS + 4)
    with open_database(report.database) as connection:
        line, detail = connection.execute(
            "SELECT line_number, detail FROM meta.quarantine WHERE table_name = 'products'"
        ).fetchone() or (None, None)
    assert line == SNIFFED_ROWS + 5  # the header is line 1
    assert (
        f"products, line {line} of products.csv: Maximum line size of {MAX_CSV_LINE_BYTES} bytes"
        in detail
    )


def test_long_texts_load_and_are_clipped_on_read_with_a_count(tmp_path: Path) -> None:
    title = "trail running shoe with a very long description " * 60_000  # 2.9 MB, one line
    products = TINY_FILES["products.csv"] + f"13,200,{title},5.0,2024-01-01\n"
    spec = parse_dataset(write_dataset(tmp_path / "d", files={"products.csv": products}))
    report = load_dataset(spec, tmp_path / "raw.duckdb")
    assert report.tables["products"].accepted == 4
    artifact = embed_tables(spec, report.database, tmp_path / "cache", tmp_path / "content.pt")
    assert artifact.tables["products"].text_clipped == 1
    vectors = artifact.load()["products"]
    assert bool(vectors["has_text"].all())
    limit = text_char_limit(TextEncoderConfig())
    expected = TextEncoder().encode([f"title: {title[:limit]}"])[0]
    np.testing.assert_allclose(vectors["text"][3].numpy(), expected, atol=1e-5)
