"""Ties: with coarse timestamps, events of several tables share a time, and a `recent` draw that
keeps the latest few edges must cut the tie the same way whether the batch's rows sit beside the
dataset's graph (the incremental path) or inside a full rebuild of both."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch
from torch_geometric.data import HeteroData

from hier_pipeline.dataset import load_dataset, parse_dataset
from hier_pipeline.dataset.arrivals import incoming_folder, with_batches
from hier_pipeline.graph import build_graph
from hier_pipeline.graph.neighbourhood import recent_neighbourhood
from hier_pipeline.graph.sampler import SamplerConfig, TemporalNeighborSampler
from hier_pipeline.incremental.accumulated import accept_batch
from hier_pipeline.incremental.extend import batch_rows
from tests.incremental.test_chain import world_without_batches

FANOUTS = (3, 3)
TIMES = {"events": "event_time", "feedback": "feedback_time"}


def coarse_world(arrivals: Path, folder: Path) -> Path:
    """The world with every event and feedback time floored to its week, and a batch of events
    and feedback by the users active in the last week, at the start of that week: ties within
    each table, across the two, and between the dataset's rows and the batch's."""
    world = world_without_batches(arrivals, folder)
    tables = {}
    for name, column in TIMES.items():
        table = pq.read_table(world / f"{name}.parquet")
        week = pc.floor_temporal(table[column], multiple=7, unit="day")
        tables[name] = table.set_column(table.schema.get_field_index(column), column, week)
        pq.write_table(tables[name], world / f"{name}.parquet")
    last = pc.max(tables["events"]["event_time"])
    active = tables["events"].filter(pc.equal(tables["events"]["event_time"], last))
    users = np.unique(active["user_id"].to_numpy())[:20]
    events = active.filter(pc.is_in(active["user_id"], pa.array(users))).slice(0, 60)
    feedback = tables["feedback"].slice(0, len(users))  # one "not interested" per user
    feedback = feedback.set_column(0, "user_id", pa.array(users, pa.int64()))
    feedback = feedback.set_column(3, "feedback_time", pa.array([last] * len(users)))
    scratch = incoming_folder(world) / ".batch0001"
    scratch.mkdir(parents=True)
    pq.write_table(events, scratch / "events.parquet")
    pq.write_table(feedback.cast(tables["feedback"].schema), scratch / "feedback.parquet")
    os.replace(scratch, incoming_folder(world) / "batch0001")
    return world


def drawn(
    sampler: TemporalNeighborSampler,
    graph: HeteroData,
    seeds: torch.Tensor,
    as_of: int,
    global_id: dict[str, torch.Tensor] | None = None,
) -> list[tuple]:
    """Every edge a `recent` draw for the user `seeds` takes: its root, endpoints (global ids)
    and, for an `engaged` edge, its event node and event table."""
    sampled = sampler.sample("users", seeds, torch.full_like(seeds, as_of))
    found = []
    for edge_type, e_id in sampled.e_id.items():
        source, _, destination = edge_type
        local_src, local_dst = sampled.edge_index[edge_type]
        ends = [sampled.n_id[source][local_src], sampled.n_id[destination][local_dst]]
        if global_id is not None:
            ends = [global_id[source][ends[0]], global_id[destination][ends[1]]]
        store = graph[edge_type]
        event = store.edge_event[e_id] if "edge_event" in store else torch.full_like(e_id, -1)
        table = store.edge_source[e_id] if "edge_source" in store else torch.full_like(e_id, -1)
        root = sampled.root[destination][local_dst]
        found += zip(
            [edge_type] * len(e_id), *(t.tolist() for t in (root, *ends, event, table)), strict=True
        )
    return sorted(found)


def test_tied_events_of_several_tables_are_cut_alike_in_both_paths(
    arrivals: Path, tmp_path: Path
) -> None:
    world = coarse_world(arrivals, tmp_path / "world")
    spec = parse_dataset(world)
    warehouse = load_dataset(spec, tmp_path / "warehouse.duckdb").database
    graph = build_graph(spec, warehouse)
    load = accept_batch(spec, "batch0001", warehouse, tmp_path / "work")
    assert {t: r.quarantined for t, r in load.tables.items()} == {"events": 0, "feedback": 0}
    rows = batch_rows(spec, graph, warehouse, load.database, latest="batch0001")
    everything = with_batches(spec)
    full = build_graph(
        everything,
        load_dataset(everything, tmp_path / "full.duckdb").database,
        statistics=graph.metadata.feature_statistics,
    )
    users = rows.referenced(graph)["users"]
    as_of = 1 + max(int(full.data[t].time.max()) for t in full.data.node_types)
    config = SamplerConfig(FANOUTS, "recent")
    near = recent_neighbourhood(graph.data, rows.rows, {"users": users}, config, as_of)
    incremental = drawn(
        TemporalNeighborSampler(near.graph, config),
        near.graph,
        near.seeds["users"],
        as_of,
        {t: near.graph[t].global_id for t in near.graph.node_types},
    )
    rebuilt = drawn(TemporalNeighborSampler(full.data, config), full.data, users, as_of)
    tables = {edge[-1] for edge in rebuilt if edge[0] == full.metadata.engaged}
    assert tables == {0, 1}  # both event tables are drawn from
    assert incremental == rebuilt
