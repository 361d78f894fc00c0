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


def keys_of_rows(database: Path, spec: DatasetSpec, table: str, rows: list[int]) -> list[str]:
    """The primary keys (as text) of the rows with these `__row`s, in their order: a few rows'
    keys without reading a large table's."""
    expression = quote(spec.tables[table].primary_key or "__row")
    with open_database(database) as connection:
        found = dict(
            connection.execute(
                f"SELECT __row, CAST({expression} AS VARCHAR) FROM raw.{quote(table)}"
                " WHERE __row IN (SELECT unnest(?::BIGINT[]))",
                [rows],
            ).fetchall()
        )
    return [str(found[row]) for row in rows]


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


def item_categories(database: Path, spec: DatasetSpec) -> dict[str, list[str]]:
    """The item table's declared categorical columns as text, rows in node order (none: {})."""
    table = spec.tables[spec.roles.item]
    columns = [c for c, kind in table.columns.items() if kind == "categorical"]
    return {c: _column(database, table.name, f"coalesce({quote(c)}, '')") for c in columns}
