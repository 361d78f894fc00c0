"""Load a described dataset into one DuckDB file: accepted rows in schema `raw`, rejected rows in
`meta.quarantine` with a reason each, per-table counts in `meta.tables`, and the `incoming/`
batches it read in `meta.batches`.

The database is built under a temporary name and renamed into place only when everything
succeeded, so a failed load never leaves a half-written database behind; a second load of the
same file while one runs fails at once (`lock.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from hier_pipeline.dataset.arrivals import record_batches
from hier_pipeline.dataset.errors import DatasetError
from hier_pipeline.dataset.report import LoadReport, TableReport
from hier_pipeline.dataset.rules import (
    STORED_TYPES,
    ForeignKeyJoin,
    literal,
    needs_text_cast,
    row_rules,
    time_expression,
)
from hier_pipeline.dataset.schema import check_against_files, read_schemas
from hier_pipeline.dataset.spec import DatasetSpec, TableSpec
from hier_pipeline.dataset.sql import count_rows, open_database, predicate, quote
from hier_pipeline.dataset.staging import QUARANTINE_DDL, stage_file, topological_order
from hier_pipeline.files.atomic import atomic_path
from hier_pipeline.files.lock import exclusive_lock


@dataclass(frozen=True)
class LoadConfig:
    """Bounds for what the loader accepts and what it may use."""

    time_min: datetime = datetime(1970, 1, 1)
    time_max: datetime = datetime(2100, 1, 1)
    memory_limit: str = "4GB"
    threads: int = 2


def load_dataset(
    spec: DatasetSpec, database: Path, config: LoadConfig = LoadConfig()
) -> LoadReport:
    """Validate every table of `spec` row by row and write the DuckDB database at `database`.

    Raises `DatabaseInUseError` when another run is loading the same file.
    """
    with building_database(database, config) as connection:
        return _load_into(connection, spec, database, config)


@contextmanager
def building_database(database: Path, config: LoadConfig) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to a new DuckDB file under the dataset lock, written under a temporary name:
    the file appears at `database`, checkpointed, only if the block succeeds."""
    with exclusive_lock(database), atomic_path(database) as partial:
        connection = open_database(
            partial, read_only=False, memory_limit=config.memory_limit, threads=config.threads
        )
        try:
            yield connection
            connection.execute("CHECKPOINT")
        finally:
            connection.close()
            Path(f"{partial}.wal").unlink(missing_ok=True)


def start_warehouse(
    connection: duckdb.DuckDBPyConnection, spec: DatasetSpec
) -> dict[str, dict[str, str]]:
    """The files' column types, checked against `spec`, and the empty `raw`, `stage` and `meta`
    schemas with the quarantine table: what every load starts from."""
    schemas = read_schemas(spec, connection)
    check_against_files(spec, schemas)
    connection.execute("CREATE SCHEMA raw; CREATE SCHEMA stage; CREATE SCHEMA meta")
    connection.execute(QUARANTINE_DDL)
    return schemas


def _load_into(
    connection: duckdb.DuckDBPyConnection, spec: DatasetSpec, database: Path, config: LoadConfig
) -> LoadReport:
    schemas = start_warehouse(connection, spec)
    reports: dict[str, TableReport] = {}
    for index, table in enumerate(spec.file_tables()):
        reports[table.name] = stage_file(connection, spec, table, f"rejects_{index}")
    loaded: set[str] = set()
    for table in topological_order(spec):
        joins = _foreign_key_joins(spec, table, schemas, loaded)
        check_rows(connection, table, schemas[table.name], joins, config, reports[table.name])
        if reports[table.name].accepted == 0 and _is_required(spec, table.name):
            raise DatasetError(_nothing_accepted(connection, reports[table.name]), table=table.name)
        loaded.add(table.name)
    _require_target_events(connection, spec, reports[spec.target_stage.table])
    for table in spec.tables.values():
        if table.implicit:
            reports[table.name] = _build_implicit(connection, spec, table, schemas)
    connection.execute("DROP SCHEMA stage CASCADE")
    connection.execute(
        "CREATE TABLE meta.tables (table_name VARCHAR, source VARCHAR, read BIGINT, accepted BIGINT, quarantined BIGINT)"
    )
    connection.executemany(
        "INSERT INTO meta.tables VALUES (?, ?, ?, ?, ?)",
        [[r.table, r.source, r.read, r.accepted, r.quarantined] for r in reports.values()],
    )
    record_batches(connection, spec)
    return LoadReport(spec.name, database, reports, dict(spec.refused_batches))


def _nothing_accepted(connection: duckdb.DuckDBPyConnection, report: TableReport) -> str:
    """Why a table that the roles or the funnel need ended up empty."""
    need = "the user/item roles or a funnel stage need it"
    if report.read == 0:
        return f"the table has no rows, but {need}"
    return (
        f"all {report.read} rows were quarantined, but {need}: {_quarantined(connection, report)}"
    )


def _require_target_events(
    connection: duckdb.DuckDBPyConnection, spec: DatasetSpec, report: TableReport
) -> None:
    """The model learns to predict the funnel's last stage: a load with none of its events would
    pass ingest and fail at training ("too few target-stage events")."""
    stage = spec.target_stage
    events = connection.sql(f"SELECT * FROM raw.{quote(stage.table)}")
    if stage.where is not None:
        events = events.filter(predicate(stage.where, table=stage.table))
    if not events.limit(1).fetchall():
        raise DatasetError(
            f"no accepted row is an event of the target stage '{stage.name}'"
            f" (where: {stage.where}): {_quarantined(connection, report)}",
            table=stage.table,
        )


def _quarantined(connection: duckdb.DuckDBPyConnection, report: TableReport) -> str:
    """The table's quarantine counts by reason and its first rows' messages, for an error: the
    database that holds them is not kept."""
    if not report.quarantined:
        return "no row of the table was quarantined"
    reasons = ", ".join(f"{code}: {n}" for code, n in sorted(report.quarantined_by_reason.items()))
    examples = connection.execute(
        "SELECT detail FROM meta.quarantine WHERE table_name = ?"
        " ORDER BY row_number, line_number LIMIT 3",
        [report.table],
    ).fetchall()
    first = "; ".join(str(row[0]) for row in examples)
    return f"quarantined {reasons}; first: {first}"


def _is_required(spec: DatasetSpec, table: str) -> bool:
    return table in (spec.roles.user, spec.roles.item) or any(
        stage.table == table for stage in spec.funnel
    )


def _foreign_key_joins(
    spec: DatasetSpec, table: TableSpec, schemas: dict[str, dict[str, str]], loaded: set[str]
) -> list[ForeignKeyJoin]:
    """Where each foreign key is looked up: the parent's accepted rows once they exist, else its
    staged rows with a valid key (self-references and cycles)."""
    joins = []
    for index, (column, target_name) in enumerate(table.foreign_keys.items()):
        target = spec.tables[target_name]
        if target.implicit:
            continue  # its ids are made from the very columns that reference it
        assert target.primary_key is not None
        schema = "raw" if target_name in loaded else "stage"
        key = quote(target.primary_key)
        source = f"(SELECT DISTINCT {key} AS k FROM {schema}.{quote(target_name)} WHERE {key} IS NOT NULL)"
        joins.append(
            ForeignKeyJoin(
                column=column,
                target=target_name,
                target_key=target.primary_key,
                source=source,
                alias=f"fk_{index}",
                cast_to_text=needs_text_cast(
                    schemas[table.name][column], schemas[target_name][target.primary_key]
                ),
            )
        )
    return joins


def check_rows(
    connection: duckdb.DuckDBPyConnection,
    table: TableSpec,
    columns: dict[str, str],
    joins: list[ForeignKeyJoin],
    config: LoadConfig,
    report: TableReport,
) -> None:
    """Split the staged rows into `raw.<table>` and quarantine, recording counts by reason."""
    staged = f"stage.{quote(table.name)}"
    rules = row_rules(table, columns, joins, config.time_min, config.time_max)
    windows = ""
    if table.primary_key is not None:
        key = quote(table.primary_key)
        windows = (
            f", row_number() OVER (PARTITION BY {key} ORDER BY __row) AS __pk_rank,"
            f" min(__row) OVER (PARTITION BY {key}) AS __pk_first"
        )
    join_sql = " ".join(
        f"LEFT JOIN {j.source} AS {j.alias} ON "
        + (
            f"CAST(s.{quote(j.column)} AS VARCHAR) = CAST({j.alias}.k AS VARCHAR)"
            if j.cast_to_text
            else f"s.{quote(j.column)} = {j.alias}.k"
        )
        for j in joins
    )
    if rules:
        reason = "CASE " + " ".join(f"WHEN {r.condition} THEN '{r.code}'" for r in rules) + " END"
        detail = "CASE " + " ".join(f"WHEN {r.condition} THEN {r.detail}" for r in rules) + " END"
        column = (
            "CASE "
            + " ".join(f"WHEN {r.condition} THEN {literal(r.column)}" for r in rules)
            + " END"
        )
        connection.execute(
            f"""CREATE TEMP TABLE verdicts AS
                SELECT __row, column_name, reason, detail FROM (
                    SELECT s.__row, {column} AS column_name, {reason} AS reason, {detail} AS detail
                    FROM (SELECT *{windows} FROM {staged}) AS s {join_sql}
                ) WHERE reason IS NOT NULL"""
        )
    else:
        connection.execute(
            "CREATE TEMP TABLE verdicts (__row BIGINT, column_name VARCHAR, reason VARCHAR, detail VARCHAR)"
        )
    connection.execute(
        f"""INSERT INTO meta.quarantine
            SELECT ?, v.__row, NULL, s.__file, v.column_name, v.reason, v.detail, to_json(s)
            FROM {staged} AS s JOIN verdicts AS v USING (__row) ORDER BY v.__row""",
        [table.name],
    )
    select = ", ".join(_typed_column(table, name, kind) for name, kind in columns.items())
    time_sql = f", {time_expression(table, columns[table.time])} AS __time" if table.time else ""
    connection.execute(
        f"""CREATE TABLE raw.{quote(table.name)} AS
            SELECT s.__row, {select}{time_sql} FROM {staged} AS s
            ANTI JOIN verdicts AS v ON s.__row = v.__row ORDER BY s.__row"""
    )
    for code, count in connection.execute(
        "SELECT reason, count(*) FROM verdicts GROUP BY reason ORDER BY reason"
    ).fetchall():
        report.quarantined_by_reason[str(code)] = report.quarantined_by_reason.get(
            str(code), 0
        ) + int(count)
    report.accepted = count_rows(connection, f"raw.{quote(table.name)}")
    connection.execute("DROP TABLE verdicts")


def _typed_column(table: TableSpec, name: str, source_type: str) -> str:
    """Declared numeric/timestamp columns are stored typed, now that every value is known to parse."""
    kind = table.columns.get(name)
    target = STORED_TYPES.get(kind or "")
    if target is None or source_type == target:
        return f"s.{quote(name)}"
    return f"TRY_CAST(s.{quote(name)} AS {target}) AS {quote(name)}"


def _build_implicit(
    connection: duckdb.DuckDBPyConnection,
    spec: DatasetSpec,
    table: TableSpec,
    schemas: dict[str, dict[str, str]],
) -> TableReport:
    """An implicit table's rows are the distinct non-null values of every column that references it."""
    assert table.primary_key is not None
    referrers = [(t, c) for t, c in spec.referrers(table.name) if not t.implicit]
    types = {schemas[t.name][c] for t, c in referrers}
    key_type = types.pop() if len(types) == 1 else "VARCHAR"
    union = " UNION ALL ".join(
        f"SELECT CAST({quote(c)} AS {key_type}) AS k FROM raw.{quote(t.name)} WHERE {quote(c)} IS NOT NULL"
        for t, c in referrers
    )
    connection.execute(
        f"""CREATE TABLE raw.{quote(table.name)} AS
            SELECT row_number() OVER (ORDER BY k) AS __row, k AS {quote(table.primary_key)}
            FROM (SELECT DISTINCT k FROM ({union})) ORDER BY k"""
    )
    count = count_rows(connection, f"raw.{quote(table.name)}")
    return TableReport(table.name, "implicit", read=count, accepted=count)
