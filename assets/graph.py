"""Asset group `graph`: the database as one heterogeneous temporal graph, with its time split."""

import time
from collections.abc import Iterator

import dagster as dg

from assets.config import GraphSplitLaunchConfig
from assets.metadata import markdown_table
from hier_pipeline.dataset import LoadReport
from hier_pipeline.graph import GraphArtifact
from resources import DatasetResource, StorageResource

GROUP = "graph"


@dg.asset(group_name=GROUP, kinds={"pytorch", "duckdb"}, owners=["team:hier-pipeline"])
def relational_graph(
    context: dg.AssetExecutionContext,
    config: GraphSplitLaunchConfig,
    dataset: DatasetResource,
    storage: StorageResource,
    raw_tables: LoadReport,
) -> dg.Output[GraphArtifact]:
    """Every table a node type, every accepted row a node, every foreign key a typed edge (and its
    reverse), funnel events as user -> item `engaged` edges with their stage; times on all of them.

    Saved as plain tensors (loadable with `torch.load(weights_only=True)`); the time split's
    boundaries travel with it so every later stage trains and judges on the same windows.
    """
    from hier_pipeline.graph import build_graph, default_split, save_graph

    spec = dataset.spec()
    started = time.perf_counter()
    graph = build_graph(spec, raw_tables.database)
    split = default_split(graph, config.train_fraction, config.validate_fraction)
    path = storage.path("graphs", f"{spec.name}.pt")
    save_graph(graph, path)
    artifact = GraphArtifact.describe(graph, path, split)
    seconds = time.perf_counter() - started
    context.log.info(
        "built %s nodes and %s edges in %.1fs",
        sum(artifact.nodes.values()),
        sum(artifact.edges.values()),
        seconds,
    )
    rows = [
        (t, f"{n:,}", len(graph.metadata.num_features[t]), len(graph.metadata.cat_features[t]))
        for t, n in artifact.nodes.items()
    ]
    return dg.Output(
        artifact,
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "nodes": sum(artifact.nodes.values()),
            "edges": sum(artifact.edges.values()),
            "build_seconds": round(seconds, 2),
            "split_t1": dg.MetadataValue.timestamp(float(split.t1)),
            "split_t2": dg.MetadataValue.timestamp(float(split.t2)),
            "node_types": markdown_table(
                ["node type", "nodes", "numeric features", "categorical features"], rows
            ),
            "edge_types": markdown_table(
                ["edge type", "edges"], ((t, f"{n:,}") for t, n in artifact.edges.items())
            ),
        },
    )


GRAPH_CHECKS = {
    "nodes_match_accepted_rows": "Each node type has exactly the accepted rows of its table.",
    "edges_match_foreign_keys": "Each foreign-key edge type has one edge per non-null key value in DuckDB.",
    "no_edge_crosses_split": "The training graph holds no node or edge at or after t1.",
}


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            name,
            asset="relational_graph",
            additional_deps=["raw_tables"],
            blocking=True,
            description=text,
        )
        for name, text in GRAPH_CHECKS.items()
    ],
    ins={
        "relational_graph": dg.AssetIn("relational_graph"),
        "raw_tables": dg.AssetIn("raw_tables"),
    },
)
def relational_graph_checks(
    dataset: DatasetResource, relational_graph: GraphArtifact, raw_tables: LoadReport
) -> Iterator[dg.AssetCheckResult]:
    """Structural checks against DuckDB counts and the split; failures block training."""
    from hier_pipeline.graph import crossing_edges, foreign_key_counts, training_graph

    accepted = {name: table.accepted for name, table in raw_tables.tables.items()}
    node_mismatch = {
        t: {"graph": n, "accepted": accepted.get(t)}
        for t, n in relational_graph.nodes.items()
        if n != accepted.get(t)
    }
    yield dg.AssetCheckResult(
        check_name="nodes_match_accepted_rows",
        passed=not node_mismatch,
        metadata={"mismatches": dg.MetadataValue.json(node_mismatch)},
    )
    expected = foreign_key_counts(dataset.spec(), raw_tables.database)
    edge_mismatch = {
        t: {"graph": relational_graph.edges.get(t), "duckdb": n}
        for t, n in expected.items()
        if relational_graph.edges.get(t) != n
    }
    yield dg.AssetCheckResult(
        check_name="edges_match_foreign_keys",
        passed=not edge_mismatch,
        metadata={"mismatches": dg.MetadataValue.json(edge_mismatch)},
    )
    crossings = crossing_edges(
        training_graph(relational_graph.load(), relational_graph.split), relational_graph.split.t1
    )
    yield dg.AssetCheckResult(
        check_name="no_edge_crosses_split",
        passed=not crossings,
        metadata={"crossings": dg.MetadataValue.json(crossings)},
    )
