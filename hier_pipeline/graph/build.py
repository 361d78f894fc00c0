"""Relational database -> one PyG `HeteroData`, for any database a dataset.yaml describes.

Every table is a node type and every accepted row a node (in `__row` order); every foreign key is a
typed edge child -> parent plus its reverse `rev_<column>`; every node and edge carries a time (when
it became known). Funnel stages and negative feedback are views over event tables: their rows
also become direct user -> item `engaged` edges with the stage as an edge attribute, so the model
can learn from interactions without walking through the event nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import torch
from torch_geometric.data import HeteroData

from hier_pipeline.dataset.errors import DatasetError
from hier_pipeline.dataset.rules import needs_text_cast
from hier_pipeline.dataset.spec import DatasetSpec, EventView
from hier_pipeline.dataset.sql import count_rows, open_database, predicate, quote
from hier_pipeline.graph.columns import plan_columns
from hier_pipeline.graph.features import FeatureConfig, encode_table

NEVER = torch.iinfo(torch.int64).min  # the time of something known since always
ENGAGED = "engaged"
NO_STAGE = -1


@dataclass(frozen=True)
class GraphConfig:
    features: FeatureConfig = field(default_factory=FeatureConfig)
    memory_limit: str = "4GB"
    threads: int = 2


@dataclass
class GraphMetadata:
    """What the tensors mean: names the model and reports need, JSON-serialisable."""

    dataset: str
    user_type: str
    item_type: str
    advertiser_type: str | None
    stages: list[str]  # funnel stage names, shallow -> deep; edge_stage indexes this list
    event_tables: list[str]  # edge_source of `engaged` edges indexes this list
    num_features: dict[str, list[str]] = field(default_factory=dict)
    cat_features: dict[str, list[str]] = field(default_factory=dict)
    hash_buckets: int = 1 << 16

    @property
    def engaged(self) -> tuple[str, str, str]:
        return (self.user_type, ENGAGED, self.item_type)


@dataclass
class RelationalGraph:
    data: HeteroData
    metadata: GraphMetadata


def build_graph(
    spec: DatasetSpec, database: Path, config: GraphConfig = GraphConfig()
) -> RelationalGraph:
    """Build the graph from a database written by `load_dataset`."""
    connection = open_database(database, memory_limit=config.memory_limit, threads=config.threads)
    try:
        connection.execute("SET enable_external_access = false")  # `where` predicates stay inside
        return _build(spec, connection, config)
    finally:
        connection.close()


def _build(
    spec: DatasetSpec, connection: duckdb.DuckDBPyConnection, config: GraphConfig
) -> RelationalGraph:
    data = HeteroData()
    metadata = GraphMetadata(
        dataset=spec.name,
        user_type=spec.roles.user,
        item_type=spec.roles.item,
        advertiser_type=spec.roles.advertiser,
        stages=[stage.name for stage in spec.funnel],
        event_tables=[],
        hash_buckets=config.features.hash_buckets,
    )
    columns = {
        table: {
            str(row[0]): str(row[1])
            for row in connection.execute(f"DESCRIBE raw.{quote(table)}").fetchall()
        }
        for table in spec.tables
    }
    for table in spec.tables.values():
        rows = count_rows(connection, f"raw.{quote(table.name)}")
        store = data[table.name]
        store.num_nodes = rows
        store.row = fetch_int64(
            connection, f"SELECT __row FROM raw.{quote(table.name)} ORDER BY __row"
        )
        store.time = read_node_time(connection, table.name, has_time=table.time is not None)
        features = encode_table(
            connection,
            table.name,
            plan_columns(table, columns[table.name]),
            table.time,
            rows,
            config.features,
        )
        store.x_num = torch.from_numpy(features.x_num)
        store.x_cat = torch.from_numpy(features.x_cat)
        metadata.num_features[table.name] = features.num_names
        metadata.cat_features[table.name] = features.cat_names
    for table in spec.tables.values():
        for column, target in table.foreign_keys.items():
            edge_index = foreign_key_edges(connection, spec, table.name, column, target, columns)
            edge_time = data[table.name].time[edge_index[0]]
            data[table.name, column, target].edge_index = edge_index
            data[table.name, column, target].edge_time = edge_time
            data[target, f"rev_{column}", table.name].edge_index = edge_index.flip(0)
            data[target, f"rev_{column}", table.name].edge_time = edge_time
    add_engagements(spec, connection, data, metadata)
    return RelationalGraph(data, metadata)


def fetch_int64(connection: duckdb.DuckDBPyConnection, sql: str) -> torch.Tensor:
    array = next(iter(connection.execute(sql).fetchnumpy().values()))
    return torch.from_numpy(np.ascontiguousarray(np.asarray(array), dtype=np.int64))


def read_node_time(
    connection: duckdb.DuckDBPyConnection, table: str, *, has_time: bool
) -> torch.Tensor:
    if not has_time:
        rows = count_rows(connection, f"raw.{quote(table)}")
        return torch.full((rows,), NEVER, dtype=torch.int64)
    return fetch_int64(
        connection,
        f"SELECT coalesce(CAST(epoch(__time) AS BIGINT), {NEVER}) FROM raw.{quote(table)} ORDER BY __row",
    )


def foreign_key_edges(
    connection: duckdb.DuckDBPyConnection,
    spec: DatasetSpec,
    table: str,
    column: str,
    target: str,
    columns: dict[str, dict[str, str]],
    first_row: int = 0,
) -> torch.Tensor:
    """[2, E] child node -> parent node, one edge per non-null foreign key value of the child
    nodes from `first_row` on (a batch's rows: the earlier ones' edges are already there)."""
    key = spec.tables[target].primary_key
    assert key is not None
    child, parent = quote(column), quote(key)
    if needs_text_cast(columns[table][column], columns[target][key]):
        child, parent = f"CAST({child} AS VARCHAR)", f"CAST({parent} AS VARCHAR)"
    result = connection.execute(
        f"""SELECT c.i, p.i FROM
              (SELECT row_number() OVER (ORDER BY __row) - 1 AS i, {child} AS k FROM raw.{quote(table)}) AS c
            JOIN
              (SELECT row_number() OVER (ORDER BY __row) - 1 AS i, {parent} AS k FROM raw.{quote(target)}) AS p
            ON c.k = p.k WHERE c.i >= ? ORDER BY c.i""",
        [first_row],
    ).fetchnumpy()
    source, destination = (np.asarray(v, dtype=np.int64) for v in result.values())
    return torch.from_numpy(np.stack([source, destination]))


def _matching_nodes(connection: duckdb.DuckDBPyConnection, view: EventView) -> np.ndarray:
    """Node indices of the event table's rows that satisfy the view's `where`."""
    relation = connection.sql(
        f"SELECT row_number() OVER (ORDER BY __row) - 1 AS i, * FROM raw.{quote(view.table)}"
    )
    if view.where is not None:
        relation = relation.filter(predicate(view.where, table=view.table))
    return np.asarray(next(iter(relation.select("i").fetchnumpy().values())), dtype=np.int64)


def add_engagements(
    spec: DatasetSpec,
    connection: duckdb.DuckDBPyConnection,
    data: HeteroData,
    metadata: GraphMetadata,
) -> None:
    """Stage and negative flags on event-table nodes, and the direct user -> item `engaged` edges."""
    views: dict[str, list[tuple[int, EventView]]] = {}
    for index, view in [*enumerate(spec.funnel), *((NO_STAGE, v) for v in spec.negative_feedback)]:
        views.setdefault(view.table, []).append((index, view))
    parts: list[dict[str, torch.Tensor]] = []
    for source_index, (table, table_views) in enumerate(views.items()):
        metadata.event_tables.append(table)
        user_column, item_column = table_views[0][1].user, table_views[0][1].item
        if any((v.user, v.item) != (user_column, item_column) for _, v in table_views):
            raise DatasetError(
                "all event views of one table must use the same user and item columns", table=table
            )
        rows = int(data[table].num_nodes)
        stage = torch.full((rows,), NO_STAGE, dtype=torch.int64)
        negative = torch.zeros(rows, dtype=torch.bool)
        for index, view in table_views:
            matching = torch.from_numpy(_matching_nodes(connection, view))
            if index == NO_STAGE:
                negative[matching] = True
            else:
                stage[matching] = torch.clamp(stage[matching], min=index)
        data[table].stage, data[table].negative = stage, negative
        user = _parent_of(data, (table, user_column, spec.roles.user), rows)
        item = _parent_of(data, (table, item_column, spec.roles.item), rows)
        keep = ((stage != NO_STAGE) | negative) & (user >= 0) & (item >= 0)
        event = keep.nonzero().flatten()
        parts.append(
            {
                "edge_index": torch.stack([user[event], item[event]]),
                "edge_time": data[table].time[event],
                "edge_stage": stage[event],
                "edge_negative": negative[event],
                "edge_event": event,
                "edge_source": torch.full_like(event, source_index),
            }
        )
    forward = data[metadata.engaged]
    backward = data[spec.roles.item, f"rev_{ENGAGED}", spec.roles.user]
    for name in (
        "edge_index",
        "edge_time",
        "edge_stage",
        "edge_negative",
        "edge_event",
        "edge_source",
    ):
        value = torch.cat([part[name] for part in parts], dim=-1)
        forward[name] = value
        backward[name] = value.flip(0) if name == "edge_index" else value


def _parent_of(data: HeteroData, edge_type: tuple[str, str, str], rows: int) -> torch.Tensor:
    """For each child row, its parent node through `edge_type` (-1 where the key was null)."""
    parent = torch.full((rows,), -1, dtype=torch.int64)
    edge_index = data[edge_type].edge_index
    parent[edge_index[0]] = edge_index[1]
    return parent
