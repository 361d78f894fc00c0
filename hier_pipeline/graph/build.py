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
from hier_pipeline.graph.features import FeatureConfig, Statistics, encode_table

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
    # table -> what normalised its columns, so that rows added later are encoded alike
    feature_statistics: dict[str, Statistics] = field(default_factory=dict)

    @property
    def engaged(self) -> tuple[str, str, str]:
        return (self.user_type, ENGAGED, self.item_type)


@dataclass(eq=False)  # equal only to itself: tensors have no value equality, and caches key on it
class RelationalGraph:
    data: HeteroData
    metadata: GraphMetadata


def build_graph(
    spec: DatasetSpec,
    database: Path,
    config: GraphConfig = GraphConfig(),
    statistics: dict[str, Statistics] | None = None,
) -> RelationalGraph:
    """Build the graph from a database written by `load_dataset`. With `statistics` (another
    graph's `feature_statistics`) columns are encoded as that graph encoded them, not refitted:
    the rebuild a model trained on that graph reads as it read its own (the incremental path's
    reference)."""
    connection = open_database(database, memory_limit=config.memory_limit, threads=config.threads)
    try:
        connection.execute("SET enable_external_access = false")  # `where` predicates stay inside
        return _build(spec, connection, config, statistics or {})
    finally:
        connection.close()


def _build(
    spec: DatasetSpec,
    connection: duckdb.DuckDBPyConnection,
    config: GraphConfig,
    statistics: dict[str, Statistics],
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
        relation = f"raw.{quote(table.name)}"
        rows = count_rows(connection, relation)
        store = data[table.name]
        store.num_nodes = rows
        store.row = fetch_int64(connection, f"SELECT __row FROM {relation} ORDER BY __row")
        store.time = read_node_time(connection, relation, has_time=table.time is not None)
        features = encode_table(
            connection,
            relation,
            plan_columns(table, columns[table.name]),
            table.time,
            rows,
            config.features,
            statistics.get(table.name),
        )
        store.x_num = torch.from_numpy(features.x_num)
        store.x_cat = torch.from_numpy(features.x_cat)
        metadata.num_features[table.name] = features.num_names
        metadata.cat_features[table.name] = features.cat_names
        metadata.feature_statistics[table.name] = features.statistics
    for table in spec.tables.values():
        for column, target in table.foreign_keys.items():
            edge_index = foreign_key_edges(connection, spec, table.name, column, target, columns)
            edge_time = data[table.name].time[edge_index[0]]
            data[table.name, column, target].edge_index = edge_index
            data[table.name, column, target].edge_time = edge_time
            data[target, f"rev_{column}", table.name].edge_index = edge_index.flip(0)
            data[target, f"rev_{column}", table.name].edge_time = edge_time
    metadata.event_tables = list(event_views(spec))
    add_engagements(spec, connection, data, metadata)
    return RelationalGraph(data, metadata)


def fetch_int64(connection: duckdb.DuckDBPyConnection, sql: str) -> torch.Tensor:
    array = next(iter(connection.execute(sql).fetchnumpy().values()))
    return torch.from_numpy(np.ascontiguousarray(np.asarray(array), dtype=np.int64))


def read_node_time(
    connection: duckdb.DuckDBPyConnection, relation: str, *, has_time: bool
) -> torch.Tensor:
    if not has_time:
        return torch.full((count_rows(connection, relation),), NEVER, dtype=torch.int64)
    return fetch_int64(
        connection,
        f"SELECT coalesce(CAST(epoch(__time) AS BIGINT), {NEVER}) FROM {relation} ORDER BY __row",
    )


def foreign_key_edges(
    connection: duckdb.DuckDBPyConnection,
    spec: DatasetSpec,
    table: str,
    column: str,
    target: str,
    columns: dict[str, dict[str, str]],
    schema: str = "raw",
    first_node: int = 0,
) -> torch.Tensor:
    """[2, E] child node -> parent node, one edge per non-null foreign key value of the rows of
    `schema.table`, numbered in `__row` order from `first_node` (a batch's rows, numbered after
    the dataset's, have a schema of their own); parents are looked up among all rows (`raw`)."""
    key = spec.tables[target].primary_key
    assert key is not None
    child, parent = quote(column), quote(key)
    if needs_text_cast(columns[table][column], columns[target][key]):
        child, parent = f"CAST({child} AS VARCHAR)", f"CAST({parent} AS VARCHAR)"
    result = connection.execute(
        f"""SELECT c.i, p.i FROM
              (SELECT row_number() OVER (ORDER BY __row) - 1 + ? AS i, {child} AS k
               FROM {schema}.{quote(table)}) AS c
            JOIN
              (SELECT row_number() OVER (ORDER BY __row) - 1 AS i, {parent} AS k
               FROM raw.{quote(target)}) AS p
            ON c.k = p.k ORDER BY c.i""",
        [first_node],
    ).fetchnumpy()
    source, destination = (np.asarray(v, dtype=np.int64) for v in result.values())
    return torch.from_numpy(np.stack([source, destination]))


def event_views(spec: DatasetSpec) -> dict[str, list[tuple[int, EventView]]]:
    """Event table -> its funnel stages (by index) and negative feedback views (`NO_STAGE`), in
    the order `edge_source` of the `engaged` edges numbers the tables."""
    views: dict[str, list[tuple[int, EventView]]] = {}
    for index, view in [*enumerate(spec.funnel), *((NO_STAGE, v) for v in spec.negative_feedback)]:
        views.setdefault(view.table, []).append((index, view))
    for table, table_views in views.items():
        columns = {(v.user, v.item) for _, v in table_views}
        if len(columns) > 1:
            raise DatasetError(
                "all event views of one table must use the same user and item columns", table=table
            )
    return views


def add_engagements(
    spec: DatasetSpec,
    connection: duckdb.DuckDBPyConnection,
    data: HeteroData,
    metadata: GraphMetadata,
    schema: str = "raw",
    first_nodes: dict[str, int] | None = None,
) -> None:
    """Stage and negative flags on event-table nodes, and the direct user -> item `engaged` edges,
    for the rows of `schema`: every row; or a batch's alone, `data` holding only its rows, the
    first of event table t being node `first_nodes[t]` of the graph extended by them."""
    parts: dict[int, dict[str, torch.Tensor]] = {}
    for source, (table, table_views) in enumerate(event_views(spec).items()):
        if first_nodes is not None and table not in first_nodes:
            continue
        first, store = (first_nodes or {}).get(table, 0), data[table]
        rows = int(store.num_nodes)
        stage = torch.full((rows,), NO_STAGE, dtype=torch.int64)
        negative = torch.zeros(rows, dtype=torch.bool)
        for index, view in table_views:
            matching = torch.from_numpy(_matching_nodes(connection, view, schema))
            if index == NO_STAGE:
                negative[matching] = True
            else:
                stage[matching] = torch.clamp(stage[matching], min=index)
        store.stage, store.negative = stage, negative
        view = table_views[0][1]
        user = _parent_of(data, (table, view.user, spec.roles.user), first, rows)
        item = _parent_of(data, (table, view.item, spec.roles.item), first, rows)
        keep = ((stage != NO_STAGE) | negative) & (user >= 0) & (item >= 0)
        event = keep.nonzero().flatten()
        parts[source] = {
            "edge_index": torch.stack([user[event], item[event]]),
            "edge_time": store.time[event],
            "edge_stage": stage[event],
            "edge_negative": negative[event],
            "edge_event": first + event,
            "edge_source": torch.full_like(event, source),
        }
    forward, backward = (
        data[metadata.engaged],
        data[spec.roles.item, f"rev_{ENGAGED}", spec.roles.user],
    )
    for name in _ENGAGED_ATTRIBUTES:
        value = torch.cat([part[name] for _, part in sorted(parts.items())], dim=-1)
        forward[name] = value
        backward[name] = value.flip(0) if name == "edge_index" else value


_ENGAGED_ATTRIBUTES = (
    "edge_index",
    "edge_time",
    "edge_stage",
    "edge_negative",
    "edge_event",
    "edge_source",
)


def _matching_nodes(
    connection: duckdb.DuckDBPyConnection, view: EventView, schema: str
) -> np.ndarray:
    """Positions among the rows of `schema.<the view's table>` of those satisfying its `where`."""
    relation = connection.sql(
        f"SELECT row_number() OVER (ORDER BY __row) - 1 AS i, * FROM {schema}.{quote(view.table)}"
    )
    if view.where is not None:
        relation = relation.filter(predicate(view.where, table=view.table))
    return np.asarray(next(iter(relation.select("i").fetchnumpy().values())), dtype=np.int64)


def _parent_of(
    data: HeteroData, edge_type: tuple[str, str, str], first: int, rows: int
) -> torch.Tensor:
    """For each of the `rows` child rows from node `first` on, its parent node through
    `edge_type` (-1 where the key was null). The edges are in child order, so the rows' edges
    are a tail of them."""
    parent = torch.full((rows,), -1, dtype=torch.int64)
    edge_index = data[edge_type].edge_index
    edge_index = edge_index[:, int(torch.searchsorted(edge_index[0], first)) :]
    parent[edge_index[0] - first] = edge_index[1]
    return parent
