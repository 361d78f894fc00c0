"""Graph build time and peak memory on a loaded dataset, against reading the same key columns.

    .venv/bin/python benchmarks/bench_graph.py [DATASET_DIR]

Defaults to ../shared/datasets/completejourney. Loads the dataset once (not timed here; see
bench_load.py), then in fresh child processes: the baseline fetches every primary/foreign key and
time column from DuckDB into numpy (the I/O no graph build can avoid), and the build turns the
database into a HeteroData with features, edges, engagements, and saves it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import measure, write_results

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPO.parent / "shared" / "datasets" / "completejourney"


def _fetch_keys(folder: str, database: str) -> dict[str, Any]:
    from hier_pipeline.dataset import parse_dataset
    from hier_pipeline.dataset.sql import open_database, quote

    spec = parse_dataset(folder)
    values = 0
    with open_database(Path(database)) as connection:
        for table in spec.tables.values():
            columns = [c for c in (table.primary_key, *table.foreign_keys) if c] + (
                ["__time"] if table.time else []
            )
            if columns:
                fetched = connection.execute(
                    f"SELECT {', '.join(quote(c) for c in columns)} FROM raw.{quote(table.name)}"
                ).fetchnumpy()
                values += sum(len(v) for v in fetched.values())
    return {"values": values}


def _build(folder: str, database: str) -> dict[str, Any]:
    from hier_pipeline.dataset import parse_dataset
    from hier_pipeline.graph import build_graph, save_graph

    graph = build_graph(parse_dataset(folder), Path(database))
    started = time.perf_counter()
    save_graph(graph, Path(database).with_suffix(".pt"))
    data = graph.data
    return {
        "nodes": int(sum(data[t].num_nodes for t in data.node_types)),
        "edges": int(sum(data[t].edge_index.shape[1] for t in data.edge_types)),
        "save_s": round(time.perf_counter() - started, 2),
        **sampler_throughput(graph),
    }


def sampler_throughput(graph: Any, seeds: int = 4096, batch: int = 512) -> dict[str, float]:
    """Temporal 2-hop [10, 5] sampling on the real graph: users and items of random target events,
    each at its event's time (what training does)."""
    import torch

    from hier_pipeline.graph import SamplerConfig, TemporalNeighborSampler

    started = time.perf_counter()
    sampler = TemporalNeighborSampler(graph.data, SamplerConfig(fanouts=(10, 5)))
    setup = time.perf_counter() - started
    engaged = graph.data[graph.metadata.engaged]
    pick = torch.randint(
        0, engaged.edge_index.shape[1], (seeds,), generator=torch.Generator().manual_seed(0)
    )
    rates = {}
    for row, node_type in enumerate((graph.metadata.user_type, graph.metadata.item_type)):
        started = time.perf_counter()
        for start in range(0, seeds, batch):
            chosen = pick[start : start + batch]
            sampler.sample(node_type, engaged.edge_index[row, chosen], engaged.edge_time[chosen])
        rates[f"sampler_{node_type}_seeds_per_s"] = round(seeds / (time.perf_counter() - started))
    return {"sampler_setup_s": round(setup, 2), **rates}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", nargs="?", type=Path, default=DEFAULT_DATASET)
    arguments = parser.parse_args()
    from hier_pipeline.dataset import load_dataset, parse_dataset

    with tempfile.TemporaryDirectory(prefix="bench-graph-") as scratch:
        database = Path(scratch) / "loaded.duckdb"
        load_dataset(parse_dataset(arguments.dataset), database)
        baseline = measure(_fetch_keys, arguments.dataset, database)
        build = measure(_build, arguments.dataset, database)
    results = {
        "dataset": str(arguments.dataset),
        "baseline_fetch_keys": baseline,
        "graph_build": build,
        "build_over_baseline_wall": round(build["wall_s"] / max(baseline["wall_s"], 1e-9), 2),
        "nodes_plus_edges_per_s": round((build["nodes"] + build["edges"]) / build["wall_s"]),
    }
    write_results("graph", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
