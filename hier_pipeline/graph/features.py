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


# column -> (median, scale, has a missing flag): what normalised a numeric or timestamp column,
# kept with the graph so rows added later are encoded as the model saw the others.
Statistics = dict[str, tuple[float, float, bool]]


@dataclass
class TableFeatures:
    x_num: np.ndarray  # float32 [N, D]
    x_cat: np.ndarray  # int64 [N, C]
    num_names: list[str] = field(default_factory=list)
    cat_names: list[str] = field(default_factory=list)
    statistics: Statistics = field(default_factory=dict)


def encode_table(
    connection: duckdb.DuckDBPyConnection,
    relation: str,
    plans: list[ColumnPlan],
    time_column: str | None,
    rows: int,
    config: FeatureConfig,
    statistics: Statistics | None = None,
) -> TableFeatures:
    """Encode the feature columns of `relation` (a table's rows, ordered by `__row`: the node
    order). Without `statistics` they are taken over these rows (a full build); with them, the
    rows are encoded as the graph's other rows were: a batch appended to a 20M-row table pays for
    its own rows only, and its features mean what they meant to the model."""
    plans = [plan for plan in plans if plan.kind in ("numeric", "timestamp", "categorical")]
    if not plans:
        return TableFeatures(np.zeros((rows, 0), np.float32), np.zeros((rows, 0), np.int64))
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
        f"SELECT {', '.join(selects)} FROM {relation} ORDER BY __row"
    ).fetchnumpy()
    encoded = TableFeatures(np.zeros((rows, 0), np.float32), np.zeros((rows, 0), np.int64))
    numeric: list[np.ndarray] = []
    categorical: list[np.ndarray] = []
    for plan, raw in zip(plans, columns.values(), strict=True):
        array = np.asarray(raw.filled(np.nan) if np.ma.isMaskedArray(raw) else raw)
        if plan.kind == "categorical":
            categorical.append(array.astype(np.int64))
            encoded.cat_names.append(plan.name)
            continue
        values = array.astype(np.float64)
        known = statistics[plan.name] if statistics is not None else _statistics(values)
        encoded.statistics[plan.name] = known
        blocks, names = (
            _timestamp_features(plan.name, values, known)
            if plan.kind == "timestamp"
            else _numeric_features(plan.name, values, known)
        )
        numeric.extend(blocks)
        encoded.num_names.extend(names)
    if numeric:
        encoded.x_num = np.stack(numeric, axis=1).astype(np.float32)
    if categorical:
        encoded.x_cat = np.stack(categorical, axis=1)
    return encoded


def _statistics(values: np.ndarray) -> tuple[float, float, bool]:
    """Median, IQR (else the standard deviation, else 1) of the finite values; whether any is
    missing (the column then gets a missing flag, for every row of the table)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return 0.0, 1.0, values.size > 0
    low, high = np.percentile(finite, [25, 75])
    scale = float(high - low) or float(finite.std()) or 1.0
    return float(np.median(finite)), scale, bool(finite.size < values.size)


def _robust(values: np.ndarray, statistics: tuple[float, float, bool]) -> np.ndarray:
    """(x - median) / IQR, clipped; 0 where missing."""
    median, scale, _ = statistics
    return np.clip(np.nan_to_num((values - median) / scale, nan=0.0), -CLIP, CLIP)


def _with_missing_flag(
    name: str,
    values: np.ndarray,
    statistics: tuple[float, float, bool],
    blocks: list[np.ndarray],
    names: list[str],
) -> None:
    if statistics[2]:
        blocks.append((~np.isfinite(values)).astype(np.float64))
        names.append(f"{name}:missing")


def _numeric_features(
    name: str, values: np.ndarray, statistics: tuple[float, float, bool]
) -> tuple[list[np.ndarray], list[str]]:
    blocks, names = [_robust(values, statistics)], [name]
    _with_missing_flag(name, values, statistics, blocks, names)
    return blocks, names


def _timestamp_features(
    name: str, seconds: np.ndarray, statistics: tuple[float, float, bool]
) -> tuple[list[np.ndarray], list[str]]:
    """Normalised epoch (trend) plus day-of-week and hour cycles (seasonality); 0 where missing."""
    known = np.isfinite(seconds)
    filled = np.where(known, seconds, 0.0)
    day_of_week = 2 * np.pi * ((filled / DAY_SECONDS + 3) % 7) / 7  # 1970-01-01 was a Thursday
    hour = 2 * np.pi * (filled % DAY_SECONDS) / DAY_SECONDS
    blocks = [_robust(seconds, statistics)]
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
    _with_missing_flag(name, seconds, statistics, blocks, names)
    return blocks, names
