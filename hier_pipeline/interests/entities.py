"""What the interests stage reads from the warehouse: entity keys and item text, in node order."""

from __future__ import annotations

from pathlib import Path

from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.dataset.sql import open_database, quote


def primary_keys(database: Path, spec: DatasetSpec, tables: list[str]) -> dict[str, list[str]]:
    """table -> its primary key values as text, row i being node i (`__row` order); a table
    without a primary key is keyed by `__row`."""
    return {
        table: _column(database, table, quote(spec.tables[table].primary_key or "__row"))
        for table in tables
    }


def item_texts(database: Path, spec: DatasetSpec) -> list[str]:
    """The item table's declared text columns joined per row ("" without text columns)."""
    table = spec.tables[spec.roles.item]
    parts = [f"coalesce(CAST({quote(c)} AS VARCHAR), '')" for c in table.text]
    return _column(database, table.name, " || ' ' || ".join(parts) or "''")


def _column(database: Path, table: str, expression: str) -> list[str]:
    with open_database(database) as connection:
        rows = connection.execute(
            f"SELECT CAST({expression} AS VARCHAR) FROM raw.{quote(table)} ORDER BY __row"
        ).fetchall()
    return [str(row[0]) for row in rows]
