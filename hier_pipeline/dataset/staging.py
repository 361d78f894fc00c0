"""Read each file as it is into `stage.<table>`, numbering rows, and quarantine the CSV lines
that DuckDB's reader itself rejects (bad quoting, wrong column count, invalid UTF-8)."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

import duckdb

from hier_pipeline.dataset.errors import DatasetError
from hier_pipeline.dataset.report import TableReport
from hier_pipeline.dataset.spec import DatasetSpec, TableSpec
from hier_pipeline.dataset.sql import count_rows, quote, reader_sql

QUARANTINE_DDL = """CREATE TABLE meta.quarantine (
    table_name VARCHAR NOT NULL,  -- the table of dataset.yaml
    row_number BIGINT,            -- the row's position among the rows the reader parsed (1-based)
    line_number BIGINT,           -- CSV only: the line of the file, for lines the reader rejected
    column_name VARCHAR,          -- the column at fault, where one is
    reason VARCHAR NOT NULL,      -- a short code, counted in reports
    detail VARCHAR NOT NULL,      -- the message, naming table, column, row and value
    row_data VARCHAR              -- the row as JSON, or the raw CSV line
)"""


def stage_file(
    connection: duckdb.DuckDBPyConnection, spec: DatasetSpec, table: TableSpec, rejects: str
) -> TableReport:
    """Copy the file into `stage.<table>` with a `__row` number; returns the table's read count."""
    assert table.file is not None
    relative = str(table.file.relative_to(spec.root))
    files = [str(f) for f in (table.file, *table.batch_files)]
    try:
        connection.execute(
            f"CREATE TABLE stage.{quote(table.name)} AS"
            f" SELECT row_number() OVER () AS __row, * FROM {reader_sql(table.file, rejects=rejects)}",
            [files if table.batch_files else files[0]],
        )
    except duckdb.Error as error:
        raise DatasetError(f"cannot be read: {error}", file=relative, table=table.name) from error
    parsed = count_rows(connection, f"stage.{quote(table.name)}")
    report = TableReport(table.name, relative, read=parsed, accepted=0)
    if table.file.suffix.lower() == ".csv":
        _quarantine_rejected_lines(connection, table.name, f"{rejects}_errors", report)
    return report


def _quarantine_rejected_lines(
    connection: duckdb.DuckDBPyConnection, table: str, errors: str, report: TableReport
) -> None:
    connection.execute(
        f"""INSERT INTO meta.quarantine
            SELECT ?, NULL, line, first(column_name ORDER BY column_idx),
                   CASE WHEN bool_or(error_type = 'INVALID ENCODING') THEN 'csv_encoding'
                        WHEN bool_or(error_type = 'LINE SIZE OVER MAXIMUM') THEN 'csv_line_too_long'
                        ELSE 'csv_malformed' END,
                   'line ' || line || ' of ' || ? || ': ' || string_agg(error_message, '; ' ORDER BY column_idx),
                   first(csv_line)
            FROM {errors} GROUP BY line ORDER BY line""",
        [table, table],
    )
    rows = connection.execute(
        "SELECT reason, count(*) FROM meta.quarantine WHERE table_name = ? GROUP BY reason", [table]
    ).fetchall()
    for reason, count in rows:
        report.quarantined_by_reason[str(reason)] = int(count)
        report.read += int(count)


def topological_order(spec: DatasetSpec) -> list[TableSpec]:
    """File tables, parents before children, so foreign keys are checked against accepted rows.

    Cycles (rare) are broken by name; the loader then checks against the parent's staged rows.
    """
    graph = {
        table.name: {
            t
            for t in table.foreign_keys.values()
            if t != table.name and not spec.tables[t].implicit
        }
        for table in spec.file_tables()
    }
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError:
        order = sorted(graph)
    return [spec.tables[name] for name in order]
