"""How many rows a file holds, counted without the reader that loads it.

The loader's own tally (rows parsed plus lines rejected) cannot notice a row that its reader
skipped: whatever the reader lost is missing from both sides. This count is what `read` means in
every report, so `read = accepted + quarantined` proves that nothing was lost.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import duckdb

from hier_pipeline.dataset.sql import MAX_CSV_LINE_BYTES


class UncountableFile(ValueError):
    """The file's rows cannot be counted (a quoted value longer than any line the reader takes)."""


def count_records(path: Path) -> int:
    """Data rows of one Parquet or CSV file (the header excluded)."""
    if path.suffix.lower() == ".parquet":
        return _parquet_rows(path)
    return _csv_records(path)


def _parquet_rows(path: Path) -> int:
    """The row count the file's footer declares (the footer, not the pages the scan decodes)."""
    with duckdb.connect() as connection:
        row = connection.execute(
            "SELECT coalesce(sum(num_rows), 0) FROM parquet_file_metadata(?)", [str(path)]
        ).fetchone()
    assert row is not None
    return int(row[0])


def _csv_records(path: Path) -> int:
    """Records in the loader's dialect (`,` and `"`, quotes doubled, quoted newlines kept),
    counted by Python's own CSV parser.

    A blank line is a record only when the header has one column (an empty value); with more
    columns it holds no row, the way DuckDB's reader treats it too. Bytes that are not UTF-8 are
    kept as they are, so they cost their row its value, never its place in the count.
    """
    csv.field_size_limit(max(csv.field_size_limit(), MAX_CSV_LINE_BYTES))
    with path.open(newline="", encoding="utf-8", errors="surrogateescape") as handle:
        records = csv.reader(_clipped_lines(handle), delimiter=",", quotechar='"')
        try:
            header = next(records, None)
            if header is None:
                return 0
            blank_is_a_row = len(header) == 1
            return sum(1 for record in records if record or blank_is_a_row)
        except csv.Error as error:
            raise UncountableFile(f"its rows cannot be counted: {error}") from error


def _clipped_lines(handle: TextIO) -> Iterator[str]:
    """The file's lines, each cut to the reader's line limit: a longer line is one record (the
    reader quarantines it), and counting it must not hold all of it in memory."""
    while line := handle.readline(MAX_CSV_LINE_BYTES):
        if line.endswith(("\n", "\r")) or len(line) < MAX_CSV_LINE_BYTES:
            yield line
            continue
        rest = line
        while rest and not rest.endswith(("\n", "\r")):
            rest = handle.readline(MAX_CSV_LINE_BYTES)
        yield line + (rest[-1:] if rest else "")
