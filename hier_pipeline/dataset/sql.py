"""The only place where SQL text is assembled from names that come from a dataset.

Identifiers are always double-quoted with embedded quotes doubled, file paths are bound as
parameters, and `where` predicates are parsed as a single expression (never pasted as statements).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from hier_pipeline.dataset.errors import DatasetError


def quote(identifier: str) -> str:
    """A DuckDB identifier that means exactly `identifier`, whatever characters it holds."""
    return '"' + identifier.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A SQL string literal for `text` (quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


# Long enough for any real description (text is clipped to what the encoder reads later, in the
# content stage); a longer line is quarantined, or refused with the file when the type sniffer
# meets it in its first rows. DuckDB's default (2 MB) refused a whole file over one long review.
MAX_CSV_LINE_BYTES = 16 * 1024 * 1024


def reader_sql(path: Path, *, rejects: str | None = None, filename: str | None = None) -> str:
    """`read_parquet(?)` or `read_csv(?, ...)` with the path (or list of paths) bound as the
    first parameter.

    For CSV, `rejects` names the tables where DuckDB keeps malformed lines (bad quoting, wrong
    column count, bad UTF-8) instead of failing, so they can be quarantined. Without it (reading
    only the schema), such lines are skipped so that they cannot hide the file's columns.
    `filename` names a column that holds each row's file.
    """
    file_column = "" if filename is None else f", filename = {literal(filename)}"
    if path.suffix.lower() == ".parquet":
        return f"read_parquet(?{file_column})"
    # A fixed dialect: the sniffer only infers types, so a malformed line cannot make it guess
    # another delimiter for the whole file.
    options = (
        "header = true, delim = ',', quote = '\"', escape = '\"',"
        f" max_line_size = {MAX_CSV_LINE_BYTES}"
    )
    if rejects is None:
        options += ", ignore_errors = true"
    else:
        options += (
            f", store_rejects = true, rejects_table = '{rejects}_errors',"
            f" rejects_scan = '{rejects}_scans'"
        )
    return f"read_csv(?, {options}{file_column})"


# What a `where` may be made of: expressions over one row's columns. A subquery or a window reads
# other rows (or tables: a table function runs only inside a subquery), so its cost is not
# bounded by the row; neither is a generator's, which grows with an argument. (An aggregate is
# refused by DuckDB's binder in a WHERE.)
_ROW_LOCAL = {
    "BETWEEN",
    "CASE",
    "CAST",
    "COLLATE",
    "COLUMN_REF",
    "COMPARISON",
    "CONJUNCTION",
    "CONSTANT",
    "FUNCTION",
    "LAMBDA",
    "OPERATOR",
    "TYPE",
}
_GENERATORS = {"generate_series", "range", "repeat", "lpad", "rpad", "list_resize", "unnest"}


def predicate(where: str, *, table: str) -> duckdb.Expression:
    """Parse a `where` predicate as one SQL expression over one row; a second statement, a
    subquery (and the table functions it could call), a window or a generator cannot hide in it."""
    try:
        expression = duckdb.SQLExpression(where)
    except duckdb.Error as error:
        raise DatasetError(f"'where: {where}' does not parse: {error}", table=table) from error
    refused = _not_row_local(where)
    if refused is not None:
        raise DatasetError(
            f"'where: {where}' may only use the row's own columns, so {refused} is refused",
            table=table,
        )
    return expression


def _not_row_local(where: str) -> str | None:
    """The first part of `where` that reads beyond its row, from DuckDB's own parse tree."""
    with duckdb.connect() as connection:
        row = connection.execute(
            "SELECT json_serialize_sql(?)", [f"SELECT 1 WHERE ({where})"]
        ).fetchone()
    assert row is not None
    tree = json.loads(row[0])
    if tree.get("error") or len(tree["statements"]) != 1:
        return "a second statement"
    node = tree["statements"][0]["node"]
    if node.get("type") != "SELECT_NODE":
        return "a set operation"
    pending = [node["where_clause"]]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            kind = item.get("class")
            if kind is not None and kind not in _ROW_LOCAL:
                return f"a {kind.lower()} expression"
            if kind == "FUNCTION" and str(item.get("function_name")).lower() in _GENERATORS:
                return f"the generator {item['function_name']}()"
            pending.extend(item.values())
    return None


DATABASE_ALIAS = "warehouse"


def open_database(
    database: Path, *, read_only: bool = True, memory_limit: str = "4GB", threads: int = 2
) -> duckdb.DuckDBPyConnection:
    """A connection to a pipeline database under a fixed catalog name.

    DuckDB names a database's catalog after its file, so a file called `raw.duckdb` would clash
    with the `raw` schema; attaching under one alias makes the file name irrelevant.
    """
    connection = connect(memory_limit, threads)
    mode = " (READ_ONLY)" if read_only else ""
    connection.execute(f"ATTACH ? AS {DATABASE_ALIAS}{mode}", [str(database)])
    connection.execute(f"USE {DATABASE_ALIAS}")
    return connection


def connect(
    memory_limit: str = "4GB", threads: int = 2, database: str = ":memory:"
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with bounded memory and threads, and UTC time."""
    connection = duckdb.connect(database)
    connection.execute("SET memory_limit = ?", [memory_limit])
    connection.execute(f"SET threads = {int(threads)}")
    connection.execute("SET TimeZone = 'UTC'")
    return connection


def count_rows(connection: duckdb.DuckDBPyConnection, relation: str) -> int:
    """`SELECT count(*)` of a relation whose name the caller has already quoted."""
    row = connection.execute(f"SELECT count(*) FROM {relation}").fetchone()
    assert row is not None
    return int(row[0])
