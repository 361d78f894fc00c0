"""The materialised graph and content vectors, extended with one validated batch.

The batch's rows are appended as new nodes after the dataset's (node indices of the dataset
never move, so the model, the embeddings and the tokens keep pointing at the same entities), with
the same column encoders, foreign-key edges and `engaged` edges as `graph/build.py` gives them:
the builder's own functions run over views of the batch's rows, numbered after the warehouse's.
Features are normalised with the statistics the graph was built with (those the model was trained
on), so no query reads the dataset's rows again but the parent lookups of foreign keys. Content is
embedded for the batch's rows only, through the content-hash cache.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import torch
from torch import Tensor

from hier_pipeline.content.stage import ContentArtifact, content_tables, embed_tables
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.dataset.sql import connect, count_rows, quote
from hier_pipeline.graph.build import (
    GraphConfig,
    RelationalGraph,
    add_engagements,
    event_views,
    fetch_int64,
    foreign_key_edges,
    read_node_time,
)
from hier_pipeline.graph.columns import plan_columns
from hier_pipeline.graph.features import Statistics, encode_table

Content = dict[str, dict[str, Tensor]]


@dataclass
class ExtendedGraph:
    graph: RelationalGraph
    new_nodes: dict[str, Tensor]  # node type -> indices of the batch's nodes (after the dataset's)
    referenced: dict[str, Tensor]  # node type -> the dataset's nodes a batch row points at


def batch_tables(spec: DatasetSpec, batch_database: Path) -> dict[str, int]:
    """table -> accepted rows of the batch, for the tables it brings rows to."""
    with _attached(warehouse=None, batch=batch_database) as connection:
        present = {
            str(row[0])
            for row in connection.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_catalog = 'batch' AND table_schema = 'raw'"
            ).fetchall()
        }
        counts = {t: count_rows(connection, f"batch.raw.{quote(t)}") for t in present}
    return {t: counts[t] for t in spec.tables if counts.get(t)}


def extend_graph(
    spec: DatasetSpec,
    graph: RelationalGraph,
    warehouse: Path,
    batch_database: Path,
    config: GraphConfig | None = None,
) -> ExtendedGraph:
    """A new `RelationalGraph`: the dataset's, plus the batch's nodes and the edges they bring.
    The input graph is left as it was; every query reads the batch's rows only, except the
    parents a foreign key looks up."""
    config = config or GraphConfig()
    touched = batch_tables(spec, batch_database)
    data = copy.copy(graph.data)
    new_nodes: dict[str, Tensor] = {}
    referenced: dict[str, list[Tensor]] = {}
    with _attached(warehouse, batch_database) as connection:
        _union_views(connection, spec, touched)
        columns = {
            t: {
                str(r[0]): str(r[1])
                for r in connection.execute(f"DESCRIBE raw.{quote(t)}").fetchall()
            }
            for t in spec.tables
        }
        for name, added in touched.items():
            table, store, batch_rows = spec.tables[name], data[name], f"new.{quote(name)}"
            before = int(store.num_nodes)
            features = encode_table(
                connection,
                batch_rows,
                plan_columns(table, columns[name]),
                table.time,
                added,
                config.features,
                statistics=_statistics(graph, name),
            )
            store.x_num = torch.cat([store.x_num, torch.from_numpy(features.x_num)])
            store.x_cat = torch.cat([store.x_cat, torch.from_numpy(features.x_cat)])
            rows = fetch_int64(connection, f"SELECT __row FROM {batch_rows} ORDER BY __row")
            store.row = torch.cat([store.row, rows])
            time = read_node_time(connection, batch_rows, has_time=table.time is not None)
            store.time = torch.cat([store.time, time])
            store.num_nodes = before + added
            new_nodes[name] = torch.arange(before, before + added)
        for name in touched:  # the batch's rows only reference rows before them, or each other
            first = int(new_nodes[name][0])
            for column, target in spec.tables[name].foreign_keys.items():
                new_edges = foreign_key_edges(
                    connection, spec, name, column, target, columns, "new", first
                )
                forward, backward = data[name, column, target], data[target, f"rev_{column}", name]
                parents = new_edges[1]
                referenced.setdefault(target, []).append(
                    parents[parents < graph.data[target].num_nodes]
                )
                edge_time = data[name].time[new_edges[0]]
                forward.edge_index = torch.cat([forward.edge_index, new_edges], dim=1)
                forward.edge_time = torch.cat([forward.edge_time, edge_time])
                backward.edge_index = torch.cat([backward.edge_index, new_edges.flip(0)], dim=1)
                backward.edge_time = torch.cat([backward.edge_time, edge_time])
        events = set(event_views(spec)) & set(touched)
        if events:
            first_nodes = {t: int(new_nodes[t][0]) for t in events}
            add_engagements(spec, connection, data, graph.metadata, "new", first_nodes)
    return ExtendedGraph(
        RelationalGraph(data, graph.metadata),
        new_nodes,
        {t: torch.cat(nodes).unique() for t, nodes in referenced.items()},
    )


def _statistics(graph: RelationalGraph, table: str) -> Statistics:
    try:
        return graph.metadata.feature_statistics[table]
    except KeyError:
        raise ValueError(
            f"the graph has no feature statistics for table {table!r}: it was built before they"
            " were kept; rebuild it (materialize relational_graph) before adding batches"
        ) from None


def extend_content(
    spec: DatasetSpec,
    content: Content,
    batch_database: Path,
    cache_dir: Path,
    path: Path,
) -> tuple[Content, ContentArtifact]:
    """The dataset's content vectors with the batch's rows appended (embedded through the cache,
    so a text or image seen before costs a lookup), and what embedding them took."""
    touched = batch_tables(spec, batch_database)
    wanted = [t for t in content_tables(spec) if t in touched]
    artifact = embed_tables(
        replace(spec, tables={t: spec.tables[t] for t in wanted}), batch_database, cache_dir, path
    )
    added = artifact.load()
    extended = {
        table: {k: torch.cat([v, added[table][k]]) for k, v in tensors.items()}
        if table in added
        else tensors
        for table, tensors in content.items()
    }
    return extended, artifact


class _attached:
    """An in-memory DuckDB connection with the warehouse as `base` and the batch as `batch`."""

    def __init__(self, warehouse: Path | None, batch: Path) -> None:
        self.connection = connect()
        if warehouse is not None:
            self.connection.execute("ATTACH ? AS base (READ_ONLY)", [str(warehouse)])
        self.connection.execute("ATTACH ? AS batch (READ_ONLY)", [str(batch)])

    def __enter__(self) -> duckdb.DuckDBPyConnection:
        return self.connection

    def __exit__(self, *_: object) -> None:
        self.connection.close()


def _union_views(
    connection: duckdb.DuckDBPyConnection, spec: DatasetSpec, touched: dict[str, int]
) -> None:
    """`raw.<table>`: the warehouse's rows, then the batch's with `__row` continuing after them,
    so that every node-order query of the builder sees the batch last; `new.<table>`: the batch's
    rows alone, with the same `__row`."""
    connection.execute("CREATE SCHEMA raw")
    connection.execute("CREATE SCHEMA new")
    for name in spec.tables:
        table = quote(name)
        base = f"SELECT * FROM base.raw.{table}"
        if name in touched:
            last = connection.execute(
                f"SELECT coalesce(max(__row), 0) FROM base.raw.{table}"
            ).fetchone()
            assert last is not None
            batch = f"SELECT * REPLACE (__row + {int(last[0])} AS __row) FROM batch.raw.{table}"
            connection.execute(f"CREATE VIEW new.{table} AS {batch}")
            base += f" UNION ALL BY NAME {batch}"
        connection.execute(f"CREATE VIEW raw.{table} AS {base}")
    connection.execute("SET enable_external_access = false")  # `where` predicates stay inside
