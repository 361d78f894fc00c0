"""Validate one batch, and only it, into a DuckDB file of its own.

The same row rules as a full load (`dataset/loader.py`), with two differences that come from
checking a batch against what is already there: a foreign key may point at a row of the dataset
(the warehouse, attached read-only) or of the batch, and a primary key that the dataset already
holds is quarantined (`existing_primary_key`) instead of silently shadowing the old row. An
implicit table gets the keys that the batch introduces. Every rejected row lands in
`meta.quarantine` with the table, column and row in its message, and is counted.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from hier_pipeline.dataset.arrivals import batch_files, batch_spec
from hier_pipeline.dataset.loader import (
    LoadConfig,
    building_database,
    check_rows,
    start_warehouse,
)
from hier_pipeline.dataset.report import LoadReport, TableReport
from hier_pipeline.dataset.rules import ForeignKeyJoin, needs_text_cast
from hier_pipeline.dataset.spec import DatasetSpec, TableSpec
from hier_pipeline.dataset.sql import count_rows, quote
from hier_pipeline.dataset.staging import stage_file, topological_order

BASE = "base"  # the catalog the dataset's warehouse is attached under


def validate_batch(
    spec: DatasetSpec,
    batch: str,
    warehouse: Path,
    database: Path,
    config: LoadConfig = LoadConfig(),
) -> LoadReport:
    """Load `incoming/<batch>/` into `database` (accepted rows in `raw`, the rest in
    `meta.quarantine`), checked against the dataset's validated `warehouse`."""
    described = batch_spec(spec, batch)
    files = batch_files(spec, batch)
    with building_database(database, config) as connection:
        connection.execute(f"ATTACH ? AS {BASE} (READ_ONLY)", [str(warehouse)])
        report = _load_batch(connection, described, set(files), database, config)
        connection.execute(f"DETACH {BASE}")
    return report


def _load_batch(
    connection: duckdb.DuckDBPyConnection,
    spec: DatasetSpec,
    tables: set[str],
    database: Path,
    config: LoadConfig,
) -> LoadReport:
    schemas = start_warehouse(connection, spec)
    reports: dict[str, TableReport] = {}
    for index, table in enumerate(t for t in spec.file_tables() if t.name in tables):
        reports[table.name] = stage_file(connection, spec, table, f"rejects_{index}")
        _quarantine_existing_keys(connection, table, reports[table.name])
    loaded: set[str] = set()
    for table in topological_order(spec):
        if table.name in tables:
            joins = _joins(spec, table, schemas, tables, loaded)
            check_rows(connection, table, schemas[table.name], joins, config, reports[table.name])
            loaded.add(table.name)
    for table in spec.tables.values():
        if table.implicit:
            reports[table.name] = _new_implicit_keys(connection, spec, table, tables)
    connection.execute("DROP SCHEMA stage CASCADE")
    return LoadReport(spec.name, database, reports)


def _quarantine_existing_keys(
    connection: duckdb.DuckDBPyConnection, table: TableSpec, report: TableReport
) -> None:
    """Rows whose primary key the dataset already holds: quarantined, then out of the stage."""
    if table.primary_key is None:
        return
    key, name = quote(table.primary_key), quote(table.name)
    clash = f"""CAST(s.{key} AS VARCHAR) IN
        (SELECT CAST({key} AS VARCHAR) FROM {BASE}.raw.{name} WHERE {key} IS NOT NULL)"""
    connection.execute(
        f"""INSERT INTO meta.quarantine
            SELECT ?, s.__row, NULL, s.__file, ?, 'existing_primary_key',
                   'row ' || s.__row || ': ' || ? || ' = ' || CAST(s.{key} AS VARCHAR)
                       || ' already exists in the dataset',
                   to_json(s)
            FROM stage.{name} AS s WHERE {clash} ORDER BY s.__row""",
        [table.name, table.primary_key, f"{table.name}.{table.primary_key}"],
    )
    removed = connection.execute(f"DELETE FROM stage.{name} AS s WHERE {clash}").fetchone()
    if removed is not None and int(removed[0]):
        report.quarantined_by_reason["existing_primary_key"] = int(removed[0])


def _joins(
    spec: DatasetSpec,
    table: TableSpec,
    schemas: dict[str, dict[str, str]],
    tables: set[str],
    loaded: set[str],
) -> list[ForeignKeyJoin]:
    """Each foreign key is looked up in the dataset's rows and, when the batch brings rows of
    the parent too, in those (accepted ones once checked, staged ones in a cycle)."""
    joins = []
    for index, (column, target_name) in enumerate(table.foreign_keys.items()):
        target = spec.tables[target_name]
        if target.implicit:
            continue
        assert target.primary_key is not None
        key, name = quote(target.primary_key), quote(target_name)
        source = f"SELECT {key} AS k FROM {BASE}.raw.{name} WHERE {key} IS NOT NULL"
        if target_name in tables:
            schema = "raw" if target_name in loaded else "stage"
            source += f" UNION SELECT {key} FROM {schema}.{name} WHERE {key} IS NOT NULL"
        joins.append(
            ForeignKeyJoin(
                column=column,
                target=target_name,
                target_key=target.primary_key,
                source=f"({source})",
                alias=f"fk_{index}",
                cast_to_text=needs_text_cast(
                    schemas[table.name][column], schemas[target_name][target.primary_key]
                ),
            )
        )
    return joins


def _new_implicit_keys(
    connection: duckdb.DuckDBPyConnection, spec: DatasetSpec, table: TableSpec, tables: set[str]
) -> TableReport:
    """The implicit table's rows that the batch adds: referenced values the dataset lacks."""
    assert table.primary_key is not None
    key = quote(table.primary_key)
    referrers = [(t, c) for t, c in spec.referrers(table.name) if t.name in tables]
    union = " UNION ".join(
        f"SELECT CAST({quote(c)} AS VARCHAR) AS k FROM raw.{quote(t.name)} WHERE {quote(c)} IS NOT NULL"
        for t, c in referrers
    )
    known = f"SELECT CAST({key} AS VARCHAR) FROM {BASE}.raw.{quote(table.name)}"
    key_type = connection.execute(
        f"SELECT data_type FROM information_schema.columns WHERE table_catalog = '{BASE}'"
        " AND table_schema = 'raw' AND table_name = ? AND column_name = ?",
        [table.name, table.primary_key],
    ).fetchone()
    assert key_type is not None
    new = (
        f"SELECT DISTINCT CAST(k AS {key_type[0]}) AS k FROM ({union}) WHERE k NOT IN ({known})"
        if referrers
        else f"SELECT CAST(NULL AS {key_type[0]}) AS k WHERE false"
    )
    connection.execute(
        f"""CREATE TABLE raw.{quote(table.name)} AS
            SELECT row_number() OVER (ORDER BY k) AS __row, k AS {key} FROM ({new}) ORDER BY k"""
    )
    count = count_rows(connection, f"raw.{quote(table.name)}")
    return TableReport(table.name, "implicit", read=count, accepted=count)
