"""Column encoders that need no per-schema code: every table's columns become two tensors.

- `x_num` (float32 [N, D]): numeric columns robustly normalised ((x - median) / IQR, clipped to
  +-5) with a missing flag where values are missing, and timestamp columns as normalised epoch plus
  cyclic day-of-week and hour features.
- `x_cat` (int64 [N, C]): categorical columns hashed into `buckets` ids (0 = missing), so an
  unseen value still gets an id and the model's embedding table has a fixed size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import numpy as np

from hier_pipeline.dataset.rules import literal
from hier_pipeline.dataset.sql import quote
from hier_pipeline.graph.columns import ColumnPlan

CLIP = 5.0
DAY_SECONDS = 86_400.0


@dataclass(frozen=True)
class FeatureConfig:
    hash_buckets: int = 1 << 16


@dataclass
class TableFeatures:
    x_num: np.ndarray  # float32 [N, D]
    x_cat: np.ndarray  # int64 [N, C]
    num_names: list[str] = field(default_factory=list)
    cat_names: list[str] = field(default_factory=list)


def encode_table(
    connection: duckdb.DuckDBPyConnection,
    table: str,
    plans: list[ColumnPlan],
    time_column: str | None,
    rows: int,
    config: FeatureConfig,
    first_row: int = 0,
) -> TableFeatures:
    """Encode one table's feature columns, rows ordered by `__row` (the node order), from node
    `first_row` on: the rows before it shape the normalisation and which missing flags exist, as
    in a full encoding, but are not encoded (a batch appended to a 20M-row table pays for the
    statistics, not for encoding every row)."""
    plans = [plan for plan in plans if plan.kind in ("numeric", "timestamp", "categorical")]
    kept = rows - first_row
    if not plans:
        return TableFeatures(np.zeros((kept, 0), np.float32), np.zeros((kept, 0), np.int64))
    selects: list[str] = []
    for plan in plans:
        column = "__time" if plan.name == time_column else quote(plan.name)
        if plan.kind == "numeric":
            selects.append(f"CAST({column} AS DOUBLE)")
        elif plan.kind == "timestamp":
            selects.append(f"epoch(CAST({column} AS TIMESTAMP))")
        elif plan.kind == "categorical":
            salt = literal(plan.name + "\x1f")
            selects.append(
                f"CASE WHEN {column} IS NULL THEN 0"
                f" ELSE 1 + CAST(hash({salt} || CAST({column} AS VARCHAR)) % {config.hash_buckets - 1} AS BIGINT) END"
            )
    columns = connection.execute(
        f"SELECT {', '.join(selects)} FROM raw.{quote(table)} ORDER BY __row"
    ).fetchnumpy()
    values = list(columns.values())
    numeric: list[np.ndarray] = []
    num_names: list[str] = []
    categorical: list[np.ndarray] = []
    cat_names: list[str] = []
    for plan, raw in zip(plans, values, strict=True):
        array = np.asarray(raw.filled(np.nan) if np.ma.isMaskedArray(raw) else raw)
        if plan.kind == "categorical":
            categorical.append(array[first_row:].astype(np.int64))
            cat_names.append(plan.name)
            continue
        seconds = array.astype(np.float64)
        blocks, names = (
            _timestamp_features(plan.name, seconds, first_row)
            if plan.kind == "timestamp"
            else _numeric_features(plan.name, seconds, first_row)
        )
        numeric.extend(blocks)
        num_names.extend(names)
    x_num = (
        np.stack(numeric, axis=1).astype(np.float32) if numeric else np.zeros((kept, 0), np.float32)
    )
    x_cat = np.stack(categorical, axis=1) if categorical else np.zeros((kept, 0), np.int64)
    return TableFeatures(x_num, x_cat, num_names, cat_names)


def _robust(values: np.ndarray, first_row: int) -> np.ndarray:
    """(x - median) / IQR of the rows from `first_row` on, the statistics over all rows."""
    finite = values[np.isfinite(values)]
    kept = values[first_row:]
    if finite.size == 0:
        return np.zeros_like(kept)
    median = float(np.median(finite))
    low, high = np.percentile(finite, [25, 75])
    scale = float(high - low) or float(finite.std()) or 1.0
    return np.clip(np.nan_to_num((kept - median) / scale, nan=0.0), -CLIP, CLIP)


def _with_missing_flag(
    name: str, values: np.ndarray, first_row: int, blocks: list[np.ndarray], names: list[str]
) -> None:
    """A flag column where any row misses the value (any row: the column layout is the table's)."""
    missing = ~np.isfinite(values)
    if missing.any():
        blocks.append(missing[first_row:].astype(np.float64))
        names.append(f"{name}:missing")


def _numeric_features(
    name: str, values: np.ndarray, first_row: int
) -> tuple[list[np.ndarray], list[str]]:
    blocks, names = [_robust(values, first_row)], [name]
    _with_missing_flag(name, values, first_row, blocks, names)
    return blocks, names


def _timestamp_features(
    name: str, seconds: np.ndarray, first_row: int
) -> tuple[list[np.ndarray], list[str]]:
    """Normalised epoch (trend) plus day-of-week and hour cycles (seasonality); 0 where missing."""
    kept = seconds[first_row:]
    known = np.isfinite(kept)
    filled = np.where(known, kept, 0.0)
    day_of_week = 2 * np.pi * ((filled / DAY_SECONDS + 3) % 7) / 7  # 1970-01-01 was a Thursday
    hour = 2 * np.pi * (filled % DAY_SECONDS) / DAY_SECONDS
    blocks = [_robust(seconds, first_row)]
    blocks += [
        np.where(known, f(angle), 0.0) for angle in (day_of_week, hour) for f in (np.sin, np.cos)
    ]
    names = [
        f"{name}:epoch",
        f"{name}:dow_sin",
        f"{name}:dow_cos",
        f"{name}:hour_sin",
        f"{name}:hour_cos",
    ]
    _with_missing_flag(name, seconds, first_row, blocks, names)
    return blocks, names
