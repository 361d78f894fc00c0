"""Decide, without any per-schema code, how each column of a table becomes a node feature.

The rule is predictable rather than clever: what the description declares wins; keys are structure,
not features; the time column and timestamps get time features; numbers are numeric; everything
else (strings, booleans) is categorical. Columns listed under `text`/`image` go to the content stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hier_pipeline.dataset.schema import NUMERIC_TYPES
from hier_pipeline.dataset.spec import TableSpec

FeatureKind = Literal["key", "numeric", "categorical", "timestamp", "content", "ignore"]


@dataclass(frozen=True)
class ColumnPlan:
    name: str
    kind: FeatureKind
    duckdb_type: str


def plan_columns(table: TableSpec, columns: dict[str, str]) -> list[ColumnPlan]:
    """One plan per stored column (the loader's own `__row`/`__time` excluded)."""
    keys = {table.primary_key, *table.foreign_keys}
    content = {*table.text, table.image}
    plans = []
    for name, duckdb_type in columns.items():
        if name.startswith("__"):
            continue
        plans.append(ColumnPlan(name, _kind(table, name, duckdb_type, keys, content), duckdb_type))
    return plans


def _kind(
    table: TableSpec, name: str, duckdb_type: str, keys: set[str | None], content: set[str | None]
) -> FeatureKind:
    declared = table.columns.get(name)
    if declared == "ignore":
        return "ignore"
    if name in keys:
        return "key"
    if declared == "text" or (name in content and declared is None):
        return "content"
    if declared is not None:
        return "timestamp" if declared == "timestamp" else declared
    if name == table.time or duckdb_type.startswith(("TIMESTAMP", "DATE")):
        return "timestamp"
    if duckdb_type in NUMERIC_TYPES or duckdb_type.startswith("DECIMAL"):
        return "numeric"
    return "categorical"
