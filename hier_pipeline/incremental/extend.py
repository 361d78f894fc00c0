"""The materialised graph and content vectors, extended with one validated batch.

The batch's rows are appended as new nodes after the dataset's (node indices of the dataset
never move, so the model, the embeddings and the tokens keep pointing at the same entities), with
the same column encoders, foreign-key edges and `engaged` edges as `graph/build.py` gives them:
the builder's own functions run over views that put the batch's rows after the warehouse's.
Features of a touched table are normalised with statistics over both (as a full build would: a
shift of a batch's share) and only the batch's rows are encoded. Content is embedded for the
batch's rows only, through the content-hash cache.
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
    fetch_int64,
    foreign_key_edges,
    read_node_time,
)
from hier_pipeline.graph.columns import plan_columns
from hier_pipeline.graph.features import encode_table

Content = dict[str, dict[str, Tensor]]


@dataclass
class ExtendedGraph:
    graph: RelationalGraph
    new_nodes: dict[str, Tensor]  # node type -> indices of the batch's nodes (after the dataset's)


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
    The input graph is left as it was."""
    config = config or GraphConfig()
    touched = batch_tables(spec, batch_database)
    data = copy.copy(graph.data)
    metadata = replace(graph.metadata, event_tables=[])
    new_nodes: dict[str, Tensor] = {}
    before_batch: dict[str, int] = {}  # table -> its nodes before the batch's
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
            table, store = spec.tables[name], data[name]
            before = before_batch[name] = int(store.num_nodes)
            rows = before + added
            features = encode_table(
                connection,
                name,
                plan_columns(table, columns[name]),
                table.time,
                rows,
                config.features,
                first_row=before,
            )
            store.x_num = torch.cat([store.x_num, torch.from_numpy(features.x_num)])
            store.x_cat = torch.cat([store.x_cat, torch.from_numpy(features.x_cat)])
            order = f"SELECT __row FROM raw.{quote(name)} ORDER BY __row OFFSET {before}"
            store.row = torch.cat([store.row, fetch_int64(connection, order)])
            time = read_node_time(connection, name, has_time=table.time is not None)
            store.time = torch.cat([store.time, time[before:]])
            store.num_nodes = rows
            new_nodes[name] = torch.arange(before, rows)
        for name in touched:  # the batch's rows only reference rows before them, or each other
            for column, target in spec.tables[name].foreign_keys.items():
                new_edges = foreign_key_edges(
                    connection, spec, name, column, target, columns, first_row=before_batch[name]
                )
                forward, backward = data[name, column, target], data[target, f"rev_{column}", name]
                edge_time = data[name].time[new_edges[0]]
                forward.edge_index = torch.cat([forward.edge_index, new_edges], dim=1)
                forward.edge_time = torch.cat([forward.edge_time, edge_time])
                backward.edge_index = torch.cat([backward.edge_index, new_edges.flip(0)], dim=1)
                backward.edge_time = torch.cat([backward.edge_time, edge_time])
        events = {v.table for v in (*spec.funnel, *spec.negative_feedback)}
        if events & set(touched):
            add_engagements(spec, connection, data, metadata)
        else:
            metadata = graph.metadata
    return ExtendedGraph(RelationalGraph(data, metadata), new_nodes)


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
    so that every node-order query of the builder sees the batch last."""
    connection.execute("CREATE SCHEMA raw")
    for name in spec.tables:
        table = quote(name)
        base = f"SELECT * FROM base.raw.{table}"
        if name in touched:
            last = connection.execute(
                f"SELECT coalesce(max(__row), 0) FROM base.raw.{table}"
            ).fetchone()
            assert last is not None
            base += (
                f" UNION ALL BY NAME SELECT * REPLACE (__row + {int(last[0])} AS __row)"
                f" FROM batch.raw.{table}"
            )
        connection.execute(f"CREATE VIEW raw.{table} AS {base}")
    connection.execute("SET enable_external_access = false")  # `where` predicates stay inside
