"""The graph stage's output as passed between pipeline steps: a file plus what a reader needs to
know without loading it (split boundaries, sizes)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.dataset.sql import open_database, quote
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.split import TemporalSplit
from hier_pipeline.graph.store import load_graph


@dataclass(frozen=True)
class GraphArtifact:
    path: Path
    split: TemporalSplit
    nodes: dict[str, int]  # node type -> nodes
    edges: dict[str, int]  # "src/relation/dst" -> edges

    @staticmethod
    def describe(graph: RelationalGraph, path: Path, split: TemporalSplit) -> GraphArtifact:
        data = graph.data
        return GraphArtifact(
            path=path,
            split=split,
            nodes={t: int(data[t].num_nodes) for t in data.node_types},
            edges={"/".join(t): int(data[t].edge_index.shape[1]) for t in data.edge_types},
        )

    def load(self) -> RelationalGraph:
        return load_graph(self.path)


def foreign_key_counts(spec: DatasetSpec, database: Path) -> dict[str, int]:
    """Non-null foreign key values per `child/column/parent`, counted in DuckDB: the expected edges."""
    counts = {}
    with open_database(database) as connection:
        for table in spec.tables.values():
            for column, target in table.foreign_keys.items():
                row = connection.execute(
                    f"SELECT count({quote(column)}) FROM raw.{quote(table.name)}"
                ).fetchone()
                assert row is not None
                counts[f"{table.name}/{column}/{target}"] = int(row[0])
    return counts
