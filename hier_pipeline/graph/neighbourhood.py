"""The edges a temporal sampler can walk from some seeds in a given number of hops.

Embedding a batch's few hundred new entities needs the edges into them and into their
neighbours, not a sampler index over the whole graph: on Complete Journey that index took 15 s to
embed 1,566 entities. The sampler built over these edges alone draws the same neighbourhoods.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor
from torch_geometric.data import HeteroData


def reachable_edges(data: HeteroData, seeds: dict[str, Tensor], hops: int) -> HeteroData:
    """A copy of `data` sharing its nodes, keeping only the edges into nodes fewer than `hops`
    hops from `seeds` (the sampler expands a node through its incoming edges, `src -> dst`),
    each with all of its attributes. Times are ignored: whatever a seed's time, the edges its
    sampler may draw are among these, in the same relative order."""
    expand = {t: torch.zeros(int(data[t].num_nodes), dtype=torch.bool) for t in data.node_types}
    for node_type, nodes in seeds.items():
        expand[node_type][nodes] = True
    expanded = {t: torch.zeros_like(mask) for t, mask in expand.items()}
    keep = {t: torch.zeros(data[t].edge_index.shape[1], dtype=torch.bool) for t in data.edge_types}
    for _ in range(hops):
        reached = {t: torch.zeros_like(mask) for t, mask in expand.items()}
        for edge_type in data.edge_types:
            source, _, destination = edge_type
            if not expand[destination].any():
                continue
            edge_index = data[edge_type].edge_index
            into = expand[destination][edge_index[1]]
            keep[edge_type] |= into
            reached[source][edge_index[0][into]] = True
        for node_type, mask in expand.items():
            expanded[node_type] |= mask
        expand = {t: mask & ~expanded[t] for t, mask in reached.items()}
    subgraph = copy.copy(data)
    for edge_type, kept in keep.items():  # every tensor of an edge store is per edge
        store = subgraph[edge_type]
        for name, value in data[edge_type].items():
            if isinstance(value, Tensor):
                store[name] = value[:, kept] if name == "edge_index" else value[kept]
    return subgraph
