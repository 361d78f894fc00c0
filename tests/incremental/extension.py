"""The dataset's graph with a batch's rows appended: what the incremental path, which keeps them
apart, must agree with."""

from __future__ import annotations

import copy

import torch
from torch_geometric.data import HeteroData

from hier_pipeline.graph import RelationalGraph
from hier_pipeline.incremental.extend import BatchRows


def extended(graph: RelationalGraph, batch: BatchRows) -> RelationalGraph:
    return RelationalGraph(append_rows(graph.data, batch.rows), graph.metadata)


def append_rows(data: HeteroData, rows: HeteroData) -> HeteroData:
    """A new graph: `data` with `rows` after it (a batch's nodes, their tensors, and the edges
    they bring, in `data`'s node indices). `engaged` edges stay grouped by event table
    (`edge_source`), in the order one build over all the rows gives them; others are appended."""
    out = copy.copy(data)
    for node_type in rows.node_types:
        store, added = out[node_type], rows[node_type]
        for name, value in added.items():
            if isinstance(value, torch.Tensor):
                store[name] = torch.cat([store[name], value])
        store.num_nodes = int(data[node_type].num_nodes) + int(added.num_nodes)
    for edge_type in rows.edge_types:
        store, added = out[edge_type], rows[edge_type]
        order = None
        if "edge_source" in added:  # a stable sort by table keeps each table's old edges first
            order = torch.sort(torch.cat([store.edge_source, added.edge_source]), stable=True)[1]
        for name, value in added.items():
            merged = torch.cat([store[name], value], dim=-1)
            store[name] = merged if order is None else merged[..., order]
    return out
