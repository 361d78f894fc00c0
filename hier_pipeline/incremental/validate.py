"""Validate one batch, on top of the batches accepted before it, into a DuckDB file of its own.

The same row rules as a full load (`dataset/loader.py`), with differences that come from checking
a batch against what is already there: a foreign key may point at a row of the dataset (the
warehouse, attached read-only), of a batch accepted since the last full load (`previous`, the
snapshot the batch before wrote) or of the batch; a primary key that the dataset or an earlier
batch already holds is quarantined (`existing_primary_key`, naming where) instead of silently
shadowing the old row; a batch that the warehouse's full load read already is quarantined whole
(`loaded_by_full_run`), so that its rows never count twice. An implicit table gets the keys that
the batch introduces. Every rejected row lands in `meta.quarantine` with the table, column and
row in its message, and is counted.

The file written is a snapshot: `raw` holds the accepted rows of every batch since the full load
up to this one (`__row` numbered after the warehouse's, batch after batch, the order in which a
full load reads them), `meta.accumulated` which batch brought which rows; `meta.quarantine` is
this batch's alone.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from hier_pipeline.dataset.arrivals import INCOMING, batch_files, batch_spec
from hier_pipeline.dataset.loader import (
    LoadConfig,
    building_database,
    check_rows,
    start_warehouse,
)
from hier_pipeline.dataset.report import LoadReport, TableReport
from hier_pipeline.dataset.rules import ForeignKeyJoin, needs_text_cast
from hier_pipeline.dataset.spec import DatasetSpec, TableSpec
from hier_pipeline.dataset.sql import DATABASE_ALIAS, count_rows, quote
from hier_pipeline.dataset.staging import stage_file, topological_order

BASE = "base"  # the catalog the dataset's warehouse is attached under
PREVIOUS = "previous"  # the catalog of the snapshot of the batches accepted before this one
ACCUMULATED_DDL = """CREATE TABLE meta.accumulated (
    batch VARCHAR NOT NULL,       -- a batch accepted since the full load
    table_name VARCHAR NOT NULL,  -- a table it brought rows to
    first_row BIGINT NOT NULL,    -- the `__row`s of those rows in this snapshot
    last_row BIGINT NOT NULL,
    rows BIGINT NOT NULL
)"""


def validate_batch(
    spec: DatasetSpec,
    batch: str,
    warehouse: Path,
    database: Path,
    config: LoadConfig = LoadConfig(),
    *,
    previous: Path | None = None,
    loaded: bool = False,
) -> LoadReport:
    """Load `incoming/<batch>/` into `database` (accepted rows, after those of `previous`, in
    `raw`, the rest in `meta.quarantine`), checked against the dataset's validated `warehouse`
    and the snapshot `previous`; `loaded`: the warehouse's full load read the batch."""
    files = batch_files(spec, batch)
    with building_database(database, config) as connection:
        connection.execute(f"ATTACH ? AS {BASE} (READ_ONLY)", [str(warehouse)])
        if previous is not None:
            connection.execute(f"ATTACH ? AS {PREVIOUS} (READ_ONLY)", [str(previous)])
        run = _BatchLoad(connection, batch_spec(spec, batch), batch, set(files), previous)
        report = run.load(database, config, loaded)
        connection.execute(f"DETACH {BASE}")
        if previous is not None:
            connection.execute(f"DETACH {PREVIOUS}")
    return report


class _BatchLoad:
    def __init__(
        self,
        connection: duckdb.DuckDBPyConnection,
        spec: DatasetSpec,
        batch: str,
        tables: set[str],
        previous: Path | None,
    ) -> None:
        self.connection, self.spec, self.batch, self.tables = connection, spec, batch, tables
        self.earlier = _tables_of(connection, PREVIOUS) if previous is not None else set()

    def load(self, database: Path, config: LoadConfig, loaded: bool) -> LoadReport:
        connection, spec, tables = self.connection, self.spec, self.tables
        schemas = start_warehouse(connection, spec)
        reports: dict[str, TableReport] = {}
        for index, table in enumerate(t for t in spec.file_tables() if t.name in tables):
            reports[table.name] = stage_file(connection, spec, table, f"rejects_{index}")
            if loaded:
                self._quarantine_loaded(table, reports[table.name])
            else:
                self._quarantine_existing_keys(table, reports[table.name])
        done: set[str] = set()
        for table in topological_order(spec):
            if table.name in tables:
                joins = self._joins(table, schemas, done)
                check_rows(
                    connection, table, schemas[table.name], joins, config, reports[table.name]
                )
                done.add(table.name)
        for table in spec.tables.values():
            if table.implicit:
                reports[table.name] = self._new_implicit_keys(table)
        connection.execute("DROP SCHEMA stage CASCADE")
        self._accumulate()
        return LoadReport(spec.name, database, reports)

    def _known(self, table: str) -> list[str]:
        """Where the rows of `table` accepted before the batch are: the dataset, earlier batches."""
        return [f"{BASE}.raw.{quote(table)}"] + (
            [f"{PREVIOUS}.raw.{quote(table)}"] if table in self.earlier else []
        )

    def _quarantine_loaded(self, table: TableSpec, report: TableReport) -> None:
        """Every row: the full load that built the warehouse read this batch already."""
        name = quote(table.name)
        self.connection.execute(
            f"""INSERT INTO meta.quarantine
                SELECT ?, s.__row, NULL, s.__file, NULL, 'loaded_by_full_run',
                       'row ' || s.__row || ' of ' || ? || ': ' || ? || ' was read by the full'
                           || ' load of the warehouse already; its rows are served from there',
                       to_json(s)
                FROM stage.{name} AS s ORDER BY s.__row""",
            [table.name, table.name, f"{INCOMING}/{self.batch}"],
        )
        removed = self.connection.execute(f"DELETE FROM stage.{name}").fetchone()
        if removed is not None and int(removed[0]):
            report.quarantined_by_reason["loaded_by_full_run"] = int(removed[0])

    def _quarantine_existing_keys(self, table: TableSpec, report: TableReport) -> None:
        """Rows whose primary key the dataset or an earlier batch holds: quarantined, naming
        which, then out of the stage."""
        if table.primary_key is None:
            return
        key, name = quote(table.primary_key), quote(table.name)
        places = [
            f"SELECT CAST({key} AS VARCHAR) AS k, 'the dataset' AS place"
            f" FROM {BASE}.raw.{name} WHERE {key} IS NOT NULL"
        ]
        if table.name in self.earlier:
            places.append(
                f"""SELECT CAST(r.{key} AS VARCHAR), 'batch ' || a.batch
                    FROM {PREVIOUS}.raw.{name} AS r JOIN {PREVIOUS}.meta.accumulated AS a
                    ON a.table_name = '{table.name}' AND r.__row BETWEEN a.first_row AND a.last_row
                    WHERE r.{key} IS NOT NULL"""
            )
        self.connection.execute(f"CREATE TEMP TABLE known AS {' UNION ALL '.join(places)}")
        clash = f"CAST(s.{key} AS VARCHAR) IN (SELECT k FROM known)"
        self.connection.execute(
            f"""INSERT INTO meta.quarantine
                SELECT ?, s.__row, NULL, s.__file, ?, 'existing_primary_key',
                       'row ' || s.__row || ': ' || ? || ' = ' || CAST(s.{key} AS VARCHAR)
                           || ' already exists in ' || known.place,
                       to_json(s)
                FROM stage.{name} AS s JOIN known ON CAST(s.{key} AS VARCHAR) = known.k
                ORDER BY s.__row""",
            [table.name, table.primary_key, f"{table.name}.{table.primary_key}"],
        )
        removed = self.connection.execute(f"DELETE FROM stage.{name} AS s WHERE {clash}").fetchone()
        self.connection.execute("DROP TABLE known")
        if removed is not None and int(removed[0]):
            report.quarantined_by_reason["existing_primary_key"] = int(removed[0])

    def _joins(
        self, table: TableSpec, schemas: dict[str, dict[str, str]], done: set[str]
    ) -> list[ForeignKeyJoin]:
        """Each foreign key is looked up in the dataset's rows, the earlier batches' and, when
        the batch brings rows of the parent too, in those (accepted ones once checked, staged
        ones in a cycle)."""
        joins = []
        for index, (column, target_name) in enumerate(table.foreign_keys.items()):
            target = self.spec.tables[target_name]
            if target.implicit:
                continue
            assert target.primary_key is not None
            key, name = quote(target.primary_key), quote(target_name)
            parts = [f"SELECT {key} AS k FROM {known}" for known in self._known(target_name)]
            if target_name in self.tables:
                parts.append(
                    f"SELECT {key} FROM {'raw' if target_name in done else 'stage'}.{name}"
                )
            source = " UNION ".join(f"{part} WHERE {key} IS NOT NULL" for part in parts)
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

    def _new_implicit_keys(self, table: TableSpec) -> TableReport:
        """The implicit table's rows that the batch adds: referenced values not known before."""
        assert table.primary_key is not None
        connection, key = self.connection, quote(table.primary_key)
        referrers = [(t, c) for t, c in self.spec.referrers(table.name) if t.name in self.tables]
        union = " UNION ".join(
            f"SELECT CAST({quote(c)} AS VARCHAR) AS k FROM raw.{quote(t.name)}"
            f" WHERE {quote(c)} IS NOT NULL"
            for t, c in referrers
        )
        known = " UNION ALL ".join(
            f"SELECT CAST({key} AS VARCHAR) FROM {k}" for k in self._known(table.name)
        )
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
            f"""CREATE TABLE raw.{quote(table.name)} AS SELECT row_number() OVER (ORDER BY k)
                AS __row, k AS {key} FROM ({new}) ORDER BY k"""
        )
        count = count_rows(connection, f"raw.{quote(table.name)}")
        return TableReport(table.name, "implicit", read=count, accepted=count)

    def _accumulate(self) -> None:
        """`raw.<table>`: the earlier batches' rows, then this batch's, numbered after every row
        before them; `meta.accumulated`: the earlier batches' ranges and this one's."""
        connection = self.connection
        connection.execute(ACCUMULATED_DDL)
        if self.earlier:
            connection.execute(
                f"INSERT INTO meta.accumulated SELECT * FROM {PREVIOUS}.meta.accumulated"
            )
        own = _tables_of(connection, DATABASE_ALIAS)
        for name in self.spec.tables:
            table, parts = quote(name), []
            if name in self.earlier:
                parts.append(f"SELECT * FROM {PREVIOUS}.raw.{table}")
            if name in own:
                maxima = " UNION ALL ".join(
                    f"SELECT max(__row) AS m FROM {known}" for known in self._known(name)
                )
                last = connection.execute(f"SELECT coalesce(max(m), 0) FROM ({maxima})").fetchone()
                assert last is not None
                offset = int(last[0])
                connection.execute(
                    f"""INSERT INTO meta.accumulated SELECT ?, ?, min(__row) + ?, max(__row) + ?,
                        count(*) FROM raw.{table} HAVING count(*) > 0""",
                    [self.batch, name, offset, offset],
                )
                parts.append(f"SELECT * REPLACE (__row + {offset} AS __row) FROM raw.{table}")
            if parts:
                connection.execute(
                    f"CREATE TABLE raw.__accumulated AS {' UNION ALL BY NAME '.join(parts)}"
                    " ORDER BY __row"
                )
                connection.execute(f"DROP TABLE IF EXISTS raw.{table}")
                connection.execute(f"ALTER TABLE raw.__accumulated RENAME TO {table}")


def _tables_of(connection: duckdb.DuckDBPyConnection, catalog: str) -> set[str]:
    """The `raw` tables of an attached catalog."""
    return {
        str(row[0])
        for row in connection.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_catalog = ? AND table_schema = 'raw'",
            [catalog],
        ).fetchall()
    }
