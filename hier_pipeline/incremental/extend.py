"""The accumulated batches' part of the graph, and the content vectors extended with their rows.

The rows of every batch accepted since the full load (a snapshot, `validate.py`) are new nodes
after the dataset's, batch after batch (node indices of the dataset never move, so the model, the
embeddings and the tokens keep pointing at the same entities; the order is a full load's), with
the same column encoders, foreign-key edges and `engaged` edges as `graph/build.py` gives them:
the builder's own functions run over views of the snapshot's rows, numbered after the
warehouse's. They are kept apart (`BatchRows`), not appended to the dataset's graph: copying a
20M-row table's tensors to add a batch cost more than everything else the batch needs
(`graph/neighbourhood.py` reads both side by side). Features are normalised with the statistics
the graph was built with (those the model was trained on), so no query reads the dataset's rows
again but the parent lookups of foreign keys. Content is embedded through the content-hash cache:
only the latest batch's texts and images are new to it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from hier_pipeline.content.embed import Encoders
from hier_pipeline.content.tables import ContentArtifact, content_tables, embed_tables
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
class BatchRows:
    """The accumulated batches' part of the graph on its own: node i of a type in `rows` is node
    `first[type] + i` of the extended graph, and its edges point at the extended graph's nodes;
    the latest batch's nodes of a type start at `latest[type]`, after the earlier batches'."""

    rows: HeteroData  # per touched table: x_num, x_cat, row, time (and stage, negative); edges
    first: dict[str, int]  # node type -> the batches' first node (the dataset's node count)
    latest: dict[str, int]  # node type -> the latest batch's first node

    @property
    def new_nodes(self) -> dict[str, Tensor]:
        """node type -> the latest batch's nodes, in extended-graph indices."""
        return self.nodes_from(self.latest)

    def nodes_from(self, start: dict[str, int]) -> dict[str, Tensor]:
        """node type -> the batches' nodes from `start` on (`first`: every batch's)."""
        return {
            t: torch.arange(start[t], self.first[t] + int(self.rows[t].num_nodes))
            for t in self.rows.node_types
        }

    def referenced(self, graph: RelationalGraph) -> dict[str, Tensor]:
        """node type -> the nodes before the latest batch's (the dataset's, or an earlier
        batch's) that a row of the latest batch points at. A row never points at a later
        batch's, so every edge out of a latest-batch node into an earlier node is one of them."""
        found: dict[str, list[Tensor]] = {}
        for (child, _, parent), store in self.rows.edge_items():
            if child in self.latest and parent in graph.data.node_types:
                source, target = store.edge_index
                limit = self.latest.get(parent, int(graph.data[parent].num_nodes))
                found.setdefault(parent, []).append(
                    target[(source >= self.latest[child]) & (target < limit)]
                )
        return {t: torch.cat(nodes).unique() for t, nodes in found.items()}


def batch_tables(spec: DatasetSpec, batch_database: Path) -> dict[str, int]:
    """table -> accepted rows of the snapshot's batches, for the tables they bring rows to."""
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


def batch_rows(
    spec: DatasetSpec,
    graph: RelationalGraph,
    warehouse: Path,
    batch_database: Path,
    config: GraphConfig | None = None,
    latest: str | None = None,
) -> BatchRows:
    """The snapshot's nodes and the edges they bring, built as `build_graph` builds the
    dataset's; every query reads the snapshot's rows only, except the parents a foreign key
    looks up. `latest`: the batch whose rows are new (None: every row of the snapshot)."""
    config = config or GraphConfig()
    touched = batch_tables(spec, batch_database)
    rows = HeteroData()
    first = {name: int(graph.data[name].num_nodes) for name in touched}
    with _attached(warehouse, batch_database) as connection:
        earlier = dict(
            connection.execute(
                "SELECT table_name, sum(rows) FROM batch.meta.accumulated WHERE batch != ?"
                " GROUP BY table_name",
                [latest],
            ).fetchall()
            if latest is not None
            else []
        )
        _union_views(connection, spec, touched)
        columns = {
            t: {
                str(r[0]): str(r[1])
                for r in connection.execute(f"DESCRIBE raw.{quote(t)}").fetchall()
            }
            for t in spec.tables
        }
        for name, added in touched.items():
            table, store, batch_rows = spec.tables[name], rows[name], f"new.{quote(name)}"
            features = encode_table(
                connection,
                batch_rows,
                plan_columns(table, columns[name]),
                table.time,
                added,
                config.features,
                statistics=_statistics(graph, name),
            )
            store.x_num = torch.from_numpy(features.x_num)
            store.x_cat = torch.from_numpy(features.x_cat)
            store.row = fetch_int64(connection, f"SELECT __row FROM {batch_rows} ORDER BY __row")
            store.time = read_node_time(connection, batch_rows, has_time=table.time is not None)
            store.num_nodes = added
        for name in touched:  # the batch's rows only reference rows before them, or each other
            for column, target in spec.tables[name].foreign_keys.items():
                edges = foreign_key_edges(
                    connection, spec, name, column, target, columns, "new", first[name]
                )
                edge_time = rows[name].time[edges[0] - first[name]]
                rows[name, column, target].edge_index = edges
                rows[name, column, target].edge_time = edge_time
                rows[target, f"rev_{column}", name].edge_index = edges.flip(0)
                rows[target, f"rev_{column}", name].edge_time = edge_time
        events = set(event_views(spec)) & set(touched)
        if events:
            add_engagements(
                spec, connection, rows, graph.metadata, "new", {t: first[t] for t in events}
            )
    return BatchRows(rows, first, {t: n + int(earlier.get(t, 0)) for t, n in first.items()})


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
    encoders: Encoders | None = None,
) -> tuple[Content, ContentArtifact]:
    """The dataset's content vectors with the batch's rows appended (embedded through the cache,
    so a text or image seen before costs a lookup), and what embedding them took."""
    touched = batch_tables(spec, batch_database)
    wanted = [t for t in content_tables(spec) if t in touched]
    artifact = embed_tables(
        replace(spec, tables={t: spec.tables[t] for t in wanted}),
        batch_database,
        cache_dir,
        path,
        encoders,
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
    """`raw.<table>`: the warehouse's rows, then the snapshot's (their `__row` continues after
    the warehouse's), so that every node-order query of the builder sees the batches last;
    `new.<table>`: the snapshot's rows alone."""
    connection.execute("CREATE SCHEMA raw")
    connection.execute("CREATE SCHEMA new")
    for name in spec.tables:
        table = quote(name)
        base = f"SELECT * FROM base.raw.{table}"
        if name in touched:
            connection.execute(f"CREATE VIEW new.{table} AS SELECT * FROM batch.raw.{table}")
            base += f" UNION ALL BY NAME SELECT * FROM new.{table}"
        connection.execute(f"CREATE VIEW raw.{table} AS {base}")
    connection.execute("SET enable_external_access = false")  # `where` predicates stay inside
