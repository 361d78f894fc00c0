"""Data-quality checks over a loaded database, run with Great Expectations 1.x.

They guard the loader's promises on what was actually stored: keys unique and non-null, foreign
keys resolve, times inside the accepted range, declared kinds stored typed and every number finite,
and counts reconcile against rows counted in the files without the loader's reader. DuckDB
narrows each table to the one column an expectation needs (joins and casts happen there, where they
are fast); GX then validates that column, so the checks scale to tens of millions of rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd

from hier_pipeline.dataset.loader import LoadConfig
from hier_pipeline.dataset.rules import FLOAT_TYPES, STORED_TYPES
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.dataset.sql import literal, quote

# Above this share of quarantined rows a table is flagged (a broken export, not an error).
QUARANTINE_WARN_RATE = 0.05


@dataclass
class CheckOutcome:
    """One check over every table it applies to."""

    name: str
    passed: bool = True
    failures: dict[str, int] = field(default_factory=dict)  # "table.column" -> failing values
    checked: dict[str, int] = field(default_factory=dict)  # "table.column" -> values checked

    def record(self, target: str, checked: int, failing: int) -> None:
        self.checked[target] = checked
        if failing:
            self.failures[target] = failing
            self.passed = False


def run_quality_checks(
    spec: DatasetSpec, connection: duckdb.DuckDBPyConnection, config: LoadConfig = LoadConfig()
) -> list[CheckOutcome]:
    """Every check, in a stable order; each outcome lists the failing table columns."""
    validator = _Validator()
    checks: list[tuple[str, Callable[[], Iterator[tuple[str, str, Any]]]]] = [
        ("primary_keys_unique_and_not_null", lambda: _primary_keys(spec)),
        ("foreign_keys_resolve", lambda: _foreign_keys(spec)),
        ("times_in_range", lambda: _times(spec, config)),
        ("kinds_stored_and_finite", lambda: _stored_kinds(spec, connection)),
    ]
    outcomes = []
    for name, plan in checks:
        outcome = CheckOutcome(name)
        for target, sql, expectation in plan():
            frame = connection.execute(sql).fetchdf()
            outcome.record(target, len(frame), validator.unexpected(frame, expectation))
        outcomes.append(outcome)
    outcomes.append(_counts_reconcile(connection))
    return outcomes


def quarantine_rates(connection: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """Share of rows quarantined per table (a warning sign for a broken export, not an error)."""
    rows = connection.execute(
        "SELECT table_name, quarantined / greatest(read, 1) FROM meta.tables ORDER BY table_name"
    ).fetchall()
    return {str(table): float(rate) for table, rate in rows}


def _primary_keys(spec: DatasetSpec) -> Iterator[tuple[str, str, Any]]:
    import great_expectations as gx

    for table in spec.tables.values():
        if table.primary_key is None:
            continue
        key = quote(table.primary_key)
        sql = f"SELECT {key} AS v FROM raw.{quote(table.name)}"
        target = f"{table.name}.{table.primary_key}"
        yield target, sql, gx.expectations.ExpectColumnValuesToNotBeNull(column="v")
        yield target, sql, gx.expectations.ExpectColumnValuesToBeUnique(column="v")


def _foreign_keys(spec: DatasetSpec) -> Iterator[tuple[str, str, Any]]:
    """DuckDB joins each child to its parent; GX checks that every non-null child found a parent."""
    import great_expectations as gx

    for table in spec.tables.values():
        for column, target_name in table.foreign_keys.items():
            target = spec.tables[target_name]
            assert target.primary_key is not None
            child, parent = quote(column), quote(target.primary_key)
            sql = f"""SELECT p.found AS v FROM raw.{quote(table.name)} AS c
                      LEFT JOIN (SELECT DISTINCT CAST({parent} AS VARCHAR) AS k, true AS found
                                 FROM raw.{quote(target_name)}) AS p
                      ON CAST(c.{child} AS VARCHAR) = p.k
                      WHERE c.{child} IS NOT NULL"""
            yield (
                f"{table.name}.{column}",
                sql,
                gx.expectations.ExpectColumnValuesToNotBeNull(column="v"),
            )


def _times(spec: DatasetSpec, config: LoadConfig) -> Iterator[tuple[str, str, Any]]:
    """Times as epoch seconds (GX compares numbers far faster than timestamps)."""
    import great_expectations as gx

    low, high = config.time_min.timestamp(), config.time_max.timestamp()
    for table in spec.tables.values():
        if table.time is None:
            continue
        sql = f"SELECT epoch(__time) AS v FROM raw.{quote(table.name)} WHERE __time IS NOT NULL"
        yield (
            f"{table.name}.{table.time}",
            sql,
            gx.expectations.ExpectColumnValuesToBeBetween(
                column="v", min_value=low, max_value=high, strict_max=True
            ),
        )


def _stored_kinds(
    spec: DatasetSpec, connection: duckdb.DuckDBPyConnection
) -> Iterator[tuple[str, str, Any]]:
    """Columns declared numeric or timestamp are stored as DOUBLE or TIMESTAMP, and no number or
    time that was stored is infinite or NaN (the loader quarantines those, `not_finite`)."""
    import great_expectations as gx

    for table in spec.file_tables():
        stored = dict(
            connection.execute(
                "SELECT column_name, data_type FROM information_schema.columns"
                " WHERE table_catalog = current_database() AND table_schema = 'raw'"
                " AND table_name = ? AND NOT starts_with(column_name, '__')",
                [table.name],
            ).fetchall()
        )
        for column, stored_type in stored.items():
            declared = STORED_TYPES.get(table.columns.get(column, ""))
            if declared is None and (column in table.columns or stored_type not in FLOAT_TYPES):
                continue
            value = quote(column)
            typed = f"typeof({value}) = {literal(declared)}" if declared else "true"
            finite = f"isfinite(TRY_CAST({value} AS {declared or 'DOUBLE'}))"
            sql = f"SELECT {typed} AND coalesce({finite}, true) AS v FROM raw.{quote(table.name)}"
            yield (
                f"{table.name}.{column}",
                sql,
                gx.expectations.ExpectColumnValuesToBeInSet(column="v", value_set=[True]),
            )


def _counts_reconcile(connection: duckdb.DuckDBPyConnection) -> CheckOutcome:
    """read = accepted + quarantined, with both sides counted from what is stored."""
    outcome = CheckOutcome("counts_reconcile")
    rows = connection.execute(
        """SELECT t.table_name, t.read,
                  (SELECT count(*) FROM meta.quarantine q WHERE q.table_name = t.table_name),
                  t.accepted
           FROM meta.tables t ORDER BY t.table_name"""
    ).fetchall()
    for table, read, quarantined, accepted in rows:
        stored = connection.execute(f"SELECT count(*) FROM raw.{quote(str(table))}").fetchone()
        assert stored is not None
        mismatch = int(read) - int(stored[0]) - int(quarantined)
        outcome.record(str(table), int(read), abs(mismatch) + abs(int(accepted) - int(stored[0])))
    return outcome


class _Validator:
    """One ephemeral GX context, reused for every expectation of a run."""

    def __init__(self) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self._context = gx.get_context(mode="ephemeral")
        self._context.variables.progress_bars = ProgressBarsConfig(globally=False)
        source = self._context.data_sources.add_pandas("hier_pipeline")
        self._batches = source.add_dataframe_asset("column").add_batch_definition_whole_dataframe(
            "all"
        )

    def unexpected(self, frame: pd.DataFrame, expectation: Any) -> int:
        """How many values break `expectation` (0 when the frame is empty)."""
        if frame.empty:
            return 0
        batch = self._batches.get_batch(batch_parameters={"dataframe": frame})
        result = batch.validate(expectation)
        if result.success:
            return 0
        return int(result.result.get("unexpected_count") or 1)
