"""Read-only views of a loaded database, for reports and the UI."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from hier_pipeline.dataset.sql import open_database


def open_readonly(database: Path) -> duckdb.DuckDBPyConnection:
    return open_database(database)


def quarantine_preview(connection: duckdb.DuckDBPyConnection, limit: int = 10) -> pd.DataFrame:
    """The first quarantined rows of each reason, so a reader sees one example of every problem."""
    return connection.execute(
        """SELECT table_name, source_file, row_number, line_number, column_name, reason, detail
           FROM meta.quarantine
           QUALIFY row_number() OVER (PARTITION BY table_name, reason ORDER BY row_number, line_number) <= 3
           ORDER BY table_name, reason, row_number, line_number LIMIT ?""",
        [limit],
    ).fetchdf()
