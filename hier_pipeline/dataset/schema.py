"""Check a `DatasetSpec` against the files it names, before a single row is loaded.

Opens each file only to read its column names and types, then checks that every column the
description mentions exists, that time columns can be turned into timestamps, and that every
`where` predicate binds to its table. Any failure raises `DatasetError`; nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb

from hier_pipeline.dataset.errors import DatasetError
from hier_pipeline.dataset.spec import DatasetSpec, EventView, TableSpec
from hier_pipeline.dataset.sql import connect, predicate, quote, reader_sql

RESERVED_PREFIX = "__"  # columns the loader adds (__row, __time)
INTEGER_TYPES = {
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
}
NUMERIC_TYPES = INTEGER_TYPES | {"FLOAT", "DOUBLE", "REAL"}

FileSchemas = Mapping[str, Mapping[str, str]]  # table -> column -> DuckDB type


def read_schemas(
    spec: DatasetSpec, connection: duckdb.DuckDBPyConnection
) -> dict[str, dict[str, str]]:
    """Column names and DuckDB types of every file table, as the loader reads it: its file and
    its batch files as one relation (a batch can widen a type, e.g. a time column to text). A
    batch file must have the file's columns in the same order: the reader matches by position."""
    schemas: dict[str, dict[str, str]] = {}
    for table in spec.file_tables():
        assert table.file is not None
        for batch_file in table.batch_files:
            check_batch_file(spec, table, batch_file, connection)
        schemas[table.name] = _describe(spec, table, [table.file, *table.batch_files], connection)
    return schemas


def check_batch_file(
    spec: DatasetSpec, table: TableSpec, batch_file: Path, connection: duckdb.DuckDBPyConnection
) -> None:
    """Raise `DatasetError` unless `batch_file` can be read after the table's file as one
    relation: readable, with the file's columns in the same order (the reader matches by
    position)."""
    assert table.file is not None
    columns = list(_describe(spec, table, [table.file], connection))
    found = list(_describe(spec, table, [batch_file], connection))
    if found != columns:
        raise DatasetError(
            f"has the columns {found}, but the table's file has {columns}:"
            " a batch file has the same, in the same order",
            file=str(batch_file.relative_to(spec.root)),
            table=table.name,
        )


def _describe(
    spec: DatasetSpec, table: TableSpec, paths: list[Path], connection: duckdb.DuckDBPyConnection
) -> dict[str, str]:
    """The columns of `paths` read as one relation, after refusing files no reader can place."""
    relative = str(paths[0].relative_to(spec.root))
    for path in paths:
        if path.stat().st_size == 0:
            raise DatasetError(
                "the file is empty (not even a header)",
                file=str(path.relative_to(spec.root)),
                table=table.name,
            )
        if path.suffix.lower() == ".csv" and _first_line_is_blank(path):
            raise DatasetError(
                "the first line is blank: a CSV file starts with its header",
                file=str(path.relative_to(spec.root)),
                table=table.name,
            )
    try:
        rows = connection.execute(
            f"DESCRIBE SELECT * FROM {reader_sql(paths[0])}", [[str(p) for p in paths]]
        ).fetchall()
    except duckdb.Error as error:
        raise DatasetError(f"cannot be read: {error}", file=relative, table=table.name) from error
    return {str(row[0]): str(row[1]) for row in rows}


def _first_line_is_blank(path: Path) -> bool:
    """Readers disagree on where the header of such a file is, so the rows cannot be counted."""
    with path.open("rb") as handle:
        return handle.readline(4096).strip(b"\r\n") == b""


def check_against_files(spec: DatasetSpec, schemas: FileSchemas) -> None:
    """Raise `DatasetError` for the first mismatch between the description and the files."""
    for table in spec.file_tables():
        columns = schemas[table.name]
        relative = str(table.file.relative_to(spec.root)) if table.file else None
        for column in columns:
            if column.startswith(RESERVED_PREFIX):
                raise DatasetError(
                    f"column names starting with '{RESERVED_PREFIX}' are reserved for the loader",
                    file=relative,
                    table=table.name,
                    column=column,
                )
        for column, field_name in table.referenced_columns().items():
            if column not in columns:
                raise DatasetError(
                    f"{field_name} names a column the file does not have (it has {sorted(columns)})",
                    file=relative,
                    table=table.name,
                    column=column,
                )
        _check_time_type(table, columns)
    _check_implicit_key_types(spec, schemas)
    for view in (*spec.funnel, *spec.negative_feedback):
        _check_view(spec, view, schemas)


def _check_time_type(table: TableSpec, columns: Mapping[str, str]) -> None:
    if table.time is None:
        return
    column_type = columns[table.time]
    if table.time_unit is not None:
        if column_type not in INTEGER_TYPES:
            raise DatasetError(
                f"time_unit '{table.time_unit}' counts whole periods, so the column must hold"
                f" integers, not {column_type}",
                table=table.name,
                column=table.time,
            )
    elif column_type in NUMERIC_TYPES:
        raise DatasetError(
            f"the time column is numeric ({column_type}): give time_unit and time_origin",
            table=table.name,
            column=table.time,
        )


def _check_implicit_key_types(spec: DatasetSpec, schemas: FileSchemas) -> None:
    """An implicit table's ids come from the columns that reference it: they must be comparable."""
    for table in spec.tables.values():
        if not table.implicit:
            continue
        referrers = [(t, c) for t, c in spec.referrers(table.name) if not t.implicit]
        if not referrers:
            raise DatasetError(
                "an implicit table needs at least one foreign key pointing at it", table=table.name
            )


def _check_view(spec: DatasetSpec, view: EventView, schemas: FileSchemas) -> None:
    table = spec.tables[view.table]
    if view.time != table.time:
        raise DatasetError(
            f"the event time must be the table's declared time column ('{table.time}'),"
            " so that it is parsed and range-checked once",
            table=view.table,
            column=view.time,
        )
    if view.where is None:
        return
    expression = predicate(view.where, table=view.table)
    sandbox = connect(memory_limit="256MB", threads=1)
    try:
        definition = ", ".join(
            f"{quote(name)} {kind}" for name, kind in schemas[view.table].items()
        )
        sandbox.execute(f"CREATE TABLE shape ({definition})")
        sandbox.execute("SET enable_external_access = false")
        sandbox.table("shape").filter(expression).limit(0).fetchall()
    except duckdb.Error as error:
        raise DatasetError(
            f"'where: {view.where}' does not apply: {error}", table=view.table
        ) from error
    finally:
        sandbox.close()
