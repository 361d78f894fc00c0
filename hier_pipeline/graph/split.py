"""Time split of a graph: train before t1, validate in [t1, t2), test from t2 on.

Entities first known at or after t1 (new advertisers and products) are absent from the training
graph: they can only be scored inductively, as in production.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch_geometric.data import HeteroData

from hier_pipeline.graph.build import RelationalGraph


@dataclass(frozen=True)
class TemporalSplit:
    """Boundaries in epoch seconds."""

    t1: int
    t2: int

    def __post_init__(self) -> None:
        if self.t1 >= self.t2:
            raise ValueError(f"split boundaries must increase: t1={self.t1} >= t2={self.t2}")


def default_split(
    graph: RelationalGraph, train: float = 0.7, validate: float = 0.15
) -> TemporalSplit:
    """Boundaries at the quantiles of target-stage event times (70% / 15% / 15% by default)."""
    engaged = graph.data[graph.metadata.engaged]
    target = len(graph.metadata.stages) - 1
    times = engaged.edge_time[engaged.edge_stage == target].double()
    if times.numel() < 3:
        raise ValueError("too few target-stage events to split in time")
    t1, t2 = torch.quantile(
        times, torch.tensor([train, train + validate], dtype=torch.float64)
    ).tolist()
    return TemporalSplit(int(t1), max(int(t2), int(t1) + 1))


def first_engagement_time(graph: RelationalGraph) -> torch.Tensor:
    """Each item's first engagement of any funnel stage or feedback, the largest int64 where it
    has none: before it, an item is cold to behaviour. Catalogue rows often have no time of their
    own (node time NEVER), so this, not the node time, says when an item became known.

    Shapes: -> [I] (int64).
    """
    meta = graph.metadata
    engaged = graph.data[meta.engaged]
    latest = torch.iinfo(torch.int64).max
    first = torch.full((int(graph.data[meta.item_type].num_nodes),), latest, dtype=torch.int64)
    return first.scatter_reduce(0, engaged.edge_index[1], engaged.edge_time, reduce="amin")


def training_graph(graph: RelationalGraph, split: TemporalSplit) -> HeteroData:
    """Only nodes and edges known before t1. Each node type keeps `global_id`, its index in the full graph (`n_id` is left to samplers)."""
    data = graph.data
    keep = {node_type: data[node_type].time < split.t1 for node_type in data.node_types}
    subgraph = data.subgraph(keep)
    for node_type in data.node_types:
        subgraph[node_type].global_id = keep[node_type].nonzero().flatten()
    for edge_type in subgraph.edge_types:
        store = subgraph[edge_type]
        early = store.edge_time < split.t1
        for name, value in list(store.items()):
            if isinstance(value, torch.Tensor) and name.startswith("edge_"):
                store[name] = value[..., early] if name == "edge_index" else value[early]
    return subgraph


def crossing_edges(data: HeteroData, t1: int) -> dict[str, int]:
    """Edges or nodes at or after t1, per type: must be all zero in a training graph."""
    crossings = {str(t): int((data[t].time >= t1).sum()) for t in data.node_types}
    crossings.update({"/".join(t): int((data[t].edge_time >= t1).sum()) for t in data.edge_types})
    return {name: count for name, count in crossings.items() if count}
