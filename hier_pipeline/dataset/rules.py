"""Row rules: the SQL that gives each staged row either no reason (accepted) or the first reason
it is quarantined for, with a message naming the table, column, row and value.

Rules are checked in a fixed order, so a row that breaks several gets the first one; counts then
reconcile exactly (read = accepted + quarantined).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from hier_pipeline.dataset.schema import INTEGER_TYPES, NUMERIC_TYPES
from hier_pipeline.dataset.spec import TableSpec
from hier_pipeline.dataset.sql import literal, quote

TEMPORAL_TYPES = ("TIMESTAMP", "DATE")
FLOAT_TYPES = ("FLOAT", "DOUBLE", "REAL")
STORED_TYPES = {"numeric": "DOUBLE", "timestamp": "TIMESTAMP"}  # declared kind -> stored type


@dataclass(frozen=True)
class RowRule:
    code: str  # short reason code, counted in reports
    column: str  # the column at fault
    condition: str  # SQL over alias `s` (the staged row) that is true when the row breaks the rule
    detail: str  # SQL text expression: the human-readable message


@dataclass(frozen=True)
class ForeignKeyJoin:
    column: str
    target: str  # referenced table name
    target_key: str
    source: str  # SQL relation holding the referenced table's valid keys
    alias: str
    cast_to_text: bool  # the two key columns have different types


# Periods farther than this from the origin are out of any sane range, and near DuckDB's
# timestamp limits (about 290,000 years) adding them to the origin would overflow and abort the
# load: they become NULL, then `time_out_of_range`, instead of being added.
PERIOD_LIMIT_YEARS = 10_000
_PERIODS_PER_YEAR = {"second": 31_557_600, "minute": 525_960, "hour": 8_766, "day": 366, "week": 53}
_PERIOD_STEP = {
    "second": "to_seconds",
    "minute": "to_minutes",
    "hour": "to_hours",
    "day": "to_days",
    "week": "to_weeks",
}


def time_expression(table: TableSpec, column_type: str) -> str:
    """SQL that turns the table's time column into a TIMESTAMP, NULL where it cannot."""
    assert table.time is not None
    column = f"s.{quote(table.time)}"
    if table.time_unit is not None:
        assert table.time_origin is not None
        origin = literal(table.time_origin.isoformat(sep=" "))
        limit = PERIOD_LIMIT_YEARS * _PERIODS_PER_YEAR[table.time_unit]
        step = _PERIOD_STEP[table.time_unit]
        return (
            f"(CASE WHEN {column} BETWEEN {-limit} AND {limit} THEN CAST({origin} AS TIMESTAMP)"
            f" + {step}(CAST({column} AS BIGINT) - 1) END)"
        )
    if column_type.startswith("TIMESTAMP WITH TIME ZONE"):
        return f"CAST({column} AS TIMESTAMP)"
    if column_type.startswith(TEMPORAL_TYPES):
        return f"CAST({column} AS TIMESTAMP)"
    return f"TRY_CAST(CAST({column} AS VARCHAR) AS TIMESTAMP)"


def row_rules(
    table: TableSpec,
    columns: Mapping[str, str],
    joins: list[ForeignKeyJoin],
    time_min: datetime,
    time_max: datetime,
) -> list[RowRule]:
    """The rules for one table, in the order they are checked."""
    name = table.name
    row = "'row ' || s.__row || ': '"
    rules: list[RowRule] = []
    if table.primary_key is not None:
        key = f"s.{quote(table.primary_key)}"
        where = literal(f"{name}.{table.primary_key}")
        rules.append(
            RowRule(
                "null_primary_key",
                table.primary_key,
                f"{key} IS NULL",
                f"{row} || {where} || ' is null'",
            )
        )
        rules.append(
            RowRule(
                "duplicate_primary_key",
                table.primary_key,
                "s.__pk_rank > 1",
                f"{row} || {where} || ' = ' || CAST({key} AS VARCHAR) || ' repeats (first at row ' || s.__pk_first || ')'",
            )
        )
    if table.time is not None:
        rules.extend(_time_rules(table, columns[table.time], row, time_min, time_max))
    for column, kind in table.columns.items():
        target = STORED_TYPES.get(kind)
        if target is None or (kind == "numeric" and columns[column] in NUMERIC_TYPES):
            continue
        value = f"s.{quote(column)}"
        rules.append(
            RowRule(
                f"not_{kind}",
                column,
                f"{value} IS NOT NULL AND TRY_CAST({value} AS {target}) IS NULL",
                f"{row} || {literal(f'{name}.{column} = ')} || CAST({value} AS VARCHAR) || {literal(f' is not {kind}')}",
            )
        )
    rules.extend(_finite_rules(table, columns, row))
    for join in joins:
        value = f"s.{quote(join.column)}"
        rules.append(
            RowRule(
                "dangling_foreign_key",
                join.column,
                f"{value} IS NOT NULL AND {join.alias}.k IS NULL",
                f"{row} || {literal(f'{name}.{join.column} = ')} || CAST({value} AS VARCHAR)"
                f" || {literal(f' not found in {join.target}.{join.target_key}')}",
            )
        )
    return rules


def _finite_rules(table: TableSpec, columns: Mapping[str, str], row: str) -> list[RowRule]:
    """`inf`, `-inf` and `nan` quarantine their row (`not_finite`) in every column read as a
    number or a time: one declared numeric or timestamp, or a float column not declared as
    another kind. No feature can be made of them, and a missing value is an empty cell or a
    null, never `nan`."""
    rules = []
    for column, column_type in columns.items():
        kind = table.columns.get(column)
        target = STORED_TYPES.get(kind or "") or (
            "DOUBLE" if kind is None and column_type in FLOAT_TYPES else None
        )
        if target is None:
            continue
        value = f"s.{quote(column)}"
        what = "time" if target == "TIMESTAMP" else "number"
        rules.append(
            RowRule(
                "not_finite",
                column,
                f"NOT isfinite(TRY_CAST({value} AS {target}))",
                f"{row} || {literal(f'{table.name}.{column} = ')} || CAST({value} AS VARCHAR)"
                f" || {literal(f' is not a finite {what}')}",
            )
        )
    return rules


def _time_rules(
    table: TableSpec, column_type: str, row: str, time_min: datetime, time_max: datetime
) -> list[RowRule]:
    assert table.time is not None
    raw = f"s.{quote(table.time)}"
    parsed = time_expression(table, column_type)
    where = literal(f"{table.name}.{table.time}")
    low, high = literal(time_min.isoformat(sep=" ")), literal(time_max.isoformat(sep=" "))
    rules = []
    if table.primary_key is None:
        # An event without a time cannot be placed before or after anything; an entity without one
        # is taken as known from the start.
        rules.append(
            RowRule("missing_time", table.time, f"{raw} IS NULL", f"{row} || {where} || ' is null'")
        )
    out_of_range = f"{parsed} < CAST({low} AS TIMESTAMP) OR {parsed} >= CAST({high} AS TIMESTAMP)"
    shown = f"CAST({parsed} AS VARCHAR)"
    if table.time_unit is None:
        rules.append(
            RowRule(
                "unparseable_time",
                table.time,
                f"{raw} IS NOT NULL AND {parsed} IS NULL",
                f"{row} || {where} || ' = ' || CAST({raw} AS VARCHAR) || ' is not a time'",
            )
        )
    else:  # every integer is a period; one too far from the origin has no time (NULL)
        out_of_range = f"{raw} IS NOT NULL AND {parsed} IS NULL OR {out_of_range}"
        shown = f"CAST({raw} AS VARCHAR) || coalesce(' (' || CAST({parsed} AS VARCHAR) || ')', '')"
    rules.append(
        RowRule(
            "time_out_of_range",
            table.time,
            out_of_range,
            f"{row} || {where} || ' = ' || {shown} || ' is outside [' || {low} || ', ' || {high} || ')'",
        )
    )
    return rules


def needs_text_cast(left_type: str, right_type: str) -> bool:
    """Keys of different types are compared as text (e.g. an integer id against a string id)."""
    same_family = left_type in INTEGER_TYPES and right_type in INTEGER_TYPES
    return left_type != right_type and not same_family
