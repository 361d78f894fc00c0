"""Read each file as it is into `stage.<table>`, numbering rows, and quarantine the CSV lines
that DuckDB's reader itself rejects (bad quoting, wrong column count, invalid UTF-8).

Every file's rows are then counted a second time without the reader (`counting.py`): a file
whose reader accounts for fewer or more rows than it holds is refused, naming the file, so that
no row disappears between the file and the report.
"""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

import duckdb

from hier_pipeline.dataset.counting import UncountableFile, count_records
from hier_pipeline.dataset.errors import DatasetError
from hier_pipeline.dataset.report import TableReport
from hier_pipeline.dataset.spec import DatasetSpec, TableSpec
from hier_pipeline.dataset.sql import quote, reader_sql

QUARANTINE_DDL = """CREATE TABLE meta.quarantine (
    table_name VARCHAR NOT NULL,  -- the table of dataset.yaml
    row_number BIGINT,            -- the row's position among the rows the reader parsed (1-based)
    line_number BIGINT,           -- CSV only: the line of source_file, for lines the reader rejected
    source_file VARCHAR,          -- the file the row came from, relative to the dataset folder
    column_name VARCHAR,          -- the column at fault, where one is
    reason VARCHAR NOT NULL,      -- a short code, counted in reports
    detail VARCHAR NOT NULL,      -- the message, naming table, column, row and value
    row_data VARCHAR              -- the row as JSON, or the raw CSV line
)"""


def stage_file(
    connection: duckdb.DuckDBPyConnection, spec: DatasetSpec, table: TableSpec, rejects: str
) -> TableReport:
    """Copy the table's file (and its batch files) into `stage.<table>` with a `__row` number and
    a `__file` (relative to the dataset folder); returns the table's independently counted read."""
    assert table.file is not None
    files = [table.file, *table.batch_files]
    relative = str(table.file.relative_to(spec.root))
    offset = len(str(spec.root)) + 2  # where the path inside the folder starts, 1-based
    try:
        connection.execute(
            f"CREATE TABLE stage.{quote(table.name)} AS"
            " SELECT row_number() OVER () AS __row, * REPLACE (substr(__file, ?) AS __file)"
            f" FROM {reader_sql(table.file, rejects=rejects, filename='__file')}",
            [offset, [str(f) for f in files]],
        )
    except duckdb.Error as error:
        raise DatasetError(f"cannot be read: {error}", file=relative, table=table.name) from error
    report = TableReport(table.name, relative, read=0, accepted=0)
    rejected: dict[str, int] = {}
    if table.file.suffix.lower() == ".csv":
        rejected = _quarantine_rejected_lines(connection, table.name, rejects, offset, report)
    parsed = dict(
        connection.execute(
            f"SELECT __file, count(*) FROM stage.{quote(table.name)} GROUP BY __file"
        ).fetchall()
    )
    for path in files:
        name = str(path.relative_to(spec.root))
        try:
            held = count_records(path)
        except UncountableFile as error:
            raise DatasetError(str(error), file=name, table=table.name) from error
        accounted = int(parsed.get(name, 0)) + rejected.get(name, 0)
        if accounted != held:
            raise DatasetError(
                f"the file holds {held} rows, but its reader parsed {parsed.get(name, 0)} and"
                f" rejected {rejected.get(name, 0)}: rows would be lost or invented (mixed line"
                " endings or quoting the reader splits differently); fix the file",
                file=name,
                table=table.name,
            )
        report.read += held
    return report


def _quarantine_rejected_lines(
    connection: duckdb.DuckDBPyConnection,
    table: str,
    rejects: str,
    offset: int,
    report: TableReport,
) -> dict[str, int]:
    """One quarantine row per rejected (file, line); returns the rejected lines per file."""
    connection.execute(
        f"""INSERT INTO meta.quarantine
            SELECT ?, NULL, e.line, substr(any_value(s.file_path), ?),
                   first(e.column_name ORDER BY e.column_idx),
                   CASE WHEN bool_or(e.error_type = 'INVALID ENCODING') THEN 'csv_encoding'
                        WHEN bool_or(e.error_type = 'LINE SIZE OVER MAXIMUM') THEN 'csv_line_too_long'
                        ELSE 'csv_malformed' END,
                   ? || ', line ' || e.line || ' of ' || substr(any_value(s.file_path), ?) || ': '
                       || string_agg(e.error_message, '; ' ORDER BY e.column_idx),
                   first(e.csv_line)
            FROM {rejects}_errors AS e JOIN {rejects}_scans AS s USING (scan_id, file_id)
            GROUP BY e.file_id, e.line ORDER BY e.file_id, e.line""",
        [table, offset, table, offset],
    )
    rows = connection.execute(
        "SELECT reason, count(*) FROM meta.quarantine WHERE table_name = ? GROUP BY reason", [table]
    ).fetchall()
    for reason, count in rows:
        report.quarantined_by_reason[str(reason)] = int(count)
    return dict(
        connection.execute(
            "SELECT source_file, count(*) FROM meta.quarantine WHERE table_name = ?"
            " GROUP BY source_file",
            [table],
        ).fetchall()
    )


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
