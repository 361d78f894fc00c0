"""Save and load a `RelationalGraph` as plain tensors, so `torch.load(weights_only=True)` can read it.

HeteroData itself is not on torch's safe-unpickling allow-list; a dict of tensors plus JSON-like
metadata is. Type names live in the metadata lists, so column names with any characters are safe.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import HeteroData

from hier_pipeline.files.atomic import atomic_path
from hier_pipeline.graph.build import GraphMetadata, RelationalGraph


def save_graph(graph: RelationalGraph, path: Path) -> None:
    """Write atomically (temporary file, then rename): a crash leaves the previous graph intact."""
    data = graph.data
    node_types, edge_types = list(data.node_types), list(data.edge_types)
    tensors: dict[str, torch.Tensor] = {}
    for index, node_type in enumerate(node_types):
        tensors[f"node{index}.num_nodes"] = torch.tensor(data[node_type].num_nodes)
        tensors.update(
            {
                f"node{index}.{k}": v
                for k, v in data[node_type].items()
                if isinstance(v, torch.Tensor)
            }
        )
    for index, edge_type in enumerate(edge_types):
        tensors.update(
            {
                f"edge{index}.{k}": v
                for k, v in data[edge_type].items()
                if isinstance(v, torch.Tensor)
            }
        )
    payload: dict[str, Any] = {
        "metadata": asdict(graph.metadata),
        "node_types": node_types,
        "edge_types": [list(edge_type) for edge_type in edge_types],
        "tensors": tensors,
    }
    with atomic_path(path) as partial:
        torch.save(payload, partial)


def load_graph(path: Path) -> RelationalGraph:
    payload = torch.load(path, weights_only=True)
    data = HeteroData()
    node_types: list[str] = payload["node_types"]
    edge_types = [tuple(edge_type) for edge_type in payload["edge_types"]]
    for key, value in payload["tensors"].items():
        owner, attribute = key.split(".", 1)
        kind, index = owner[:4], int(owner[4:])
        store = data[node_types[index]] if kind == "node" else data[edge_types[index]]
        store[attribute] = int(value) if attribute == "num_nodes" else value
    return RelationalGraph(data, GraphMetadata(**payload["metadata"]))
