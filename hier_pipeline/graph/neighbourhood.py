"""The part of a graph a temporal sampler draws, with the `recent` strategy, from seeds all
embedded as of one time: the latest `fanout` usable edges into each node it expands, hop by hop,
as a small graph of its own.

Embedding a batch's new entities (and the users its events touch) needs those edges only. On
Complete Journey, appending the batch's 0.4M rows to the 22.6M-node graph and indexing every edge
within two hops of the seeds took 25 s of the incremental path; reading the dataset's graph and
the batch's rows side by side (`added`, never concatenated) and keeping what the sampler draws
takes a fraction of it. A sampler over the result draws the same neighbourhoods (in the result's
node indices; `global_id` maps them back) as one over the whole extended graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import HeteroData
from torch_geometric.typing import EdgeType

from hier_pipeline.graph.csr import ragged_arange
from hier_pipeline.graph.sampler import SamplerConfig, Selection, stage_channels

NODE_ATTRIBUTES = ("x_num", "x_cat", "time")  # what samplers and models read of a node


@dataclass(frozen=True)
class Neighbourhood:
    """`graph`: per node type `global_id` (its index in the extended graph, ascending), `degree`
    (edges leaving it in the extended graph, float) and `NODE_ATTRIBUTES`; per edge type every
    attribute of the source's edges. `seeds`: node type -> the seeds' indices in `graph`."""

    graph: HeteroData
    seeds: dict[str, Tensor]


def recent_neighbourhood(
    data: HeteroData,
    added: HeteroData,
    seeds: dict[str, Tensor],
    sampling: SamplerConfig,
    before: int,
) -> Neighbourhood:
    """What a `recent` sampler with `sampling`'s fanouts draws for `seeds` (extended-graph
    indices) at time `before`, over `data` extended by `added` (node i of type t in `added` is
    node `data[t].num_nodes + i`; its edges use extended indices and follow `data`'s). A stage
    drawn apart (`sampling.stage`) is kept apart here too, with its own caps."""
    graph = _Extended(data, added)
    expand = {t: torch.zeros(n, dtype=torch.bool) for t, n in graph.size.items()}
    for node_type, nodes in seeds.items():
        expand[node_type][nodes] = True
    reached_before = {t: mask.clone() for t, mask in expand.items()}
    kept: dict[EdgeType, list[Tensor]] = {t: [] for t in data.edge_types}
    for hop in range(len(sampling.fanouts)):
        reached = {t: torch.zeros_like(mask) for t, mask in expand.items()}
        for edge_type in data.edge_types:
            source, _, destination = edge_type
            if not expand[destination].any():
                continue
            for selection, fanouts in stage_channels(data[edge_type], sampling):
                # A node first reached at this hop from one seed may be reached later from
                # another, and expanded then with a later hop's fanout: keep enough for the largest.
                fanout = -1 if -1 in fanouts[hop:] else max(fanouts[hop:])
                chosen, src = graph.latest_into(
                    edge_type, expand[destination], fanout, before, selection
                )
                kept[edge_type].append(chosen)
                reached[source][src] = True
        expand = {t: mask & ~reached_before[t] for t, mask in reached.items()}
        for node_type, mask in reached.items():
            reached_before[node_type] |= mask
    return graph.subgraph({t: _union(parts) for t, parts in kept.items()}, seeds)


class _Extended:
    """`data` and the rows `added` after it, read side by side as one graph."""

    def __init__(self, data: HeteroData, added: HeteroData) -> None:
        self.data, self.added = data, added
        self.size = {
            t: int(data[t].num_nodes) + (int(added[t].num_nodes) if t in added.node_types else 0)
            for t in data.node_types
        }

    def node(self, node_type: str, name: str, index: Tensor) -> Tensor:
        """Attribute `name` of the nodes at extended `index`."""
        return _take(
            self.data[node_type][name],
            self.added[node_type][name] if node_type in self.added.node_types else None,
            index,
        )

    def edge(self, edge_type: EdgeType, name: str, index: Tensor) -> Tensor:
        """Attribute `name` of the edges at `index` (the dataset's first, then the added ones)."""
        base = self.data[edge_type][name]
        added = self.added[edge_type][name] if edge_type in self.added.edge_types else None
        if name != "edge_index":
            return _take(base, added, index)
        return _take(base.t(), None if added is None else added.t(), index).t()

    def num_edges(self, edge_type: EdgeType) -> tuple[int, int]:
        added = (
            self.added[edge_type].edge_index.shape[1] if edge_type in self.added.edge_types else 0
        )
        return int(self.data[edge_type].edge_index.shape[1]), int(added)

    def in_build_order(self, edge_type: EdgeType, index: Tensor) -> Tensor:
        """Edges (ascending indices) in the order one build of all the rows gives them, which
        is how a `recent` draw breaks ties of time: a foreign key's by child row (the dataset's
        before the batches', as here), but `engaged` edges by event table (`edge_source`), then
        event row, so that a batch's event tied with a later table's event of the dataset is
        drawn before it, as in a full rebuild, not after."""
        if "edge_source" not in self.data[edge_type]:
            return index
        source = self.edge(edge_type, "edge_source", index).numpy()
        event = self.edge(edge_type, "edge_event", index).numpy()
        return index[torch.from_numpy(np.lexsort((event, source)))]

    def latest_into(
        self,
        edge_type: EdgeType,
        expand: Tensor,
        fanout: int,
        before: int,
        selection: Selection = None,
    ) -> tuple[Tensor, Tensor]:
        """The edges (indices) into the `expand` nodes a `recent` draw of `fanout` can take
        before `before`, and their sources; only those of one channel's `selection`
        (`stage_channels`)."""
        source, _, destination = edge_type
        base, added = self.num_edges(edge_type)
        candidates = [expand[self.data[edge_type].edge_index[1]].nonzero().flatten()]
        if added:
            into = expand[self.added[edge_type].edge_index[1]].nonzero().flatten()
            candidates.append(base + into)
        index = self.in_build_order(edge_type, torch.cat(candidates))
        src, dst = self.edge(edge_type, "edge_index", index)
        usable = torch.maximum(  # as `TimeSortedCSR` orders them
            self.edge(edge_type, "edge_time", index),
            torch.maximum(self.node(source, "time", src), self.node(destination, "time", dst)),
        )
        valid = usable < before
        if selection is not None:
            stage, apart = selection
            valid &= (self.edge(edge_type, "edge_stage", index) == stage) == apart
        chosen = _latest(dst[valid].numpy(), usable[valid].numpy(), fanout)
        return index[valid][chosen], src[valid][chosen]

    def subgraph(self, edges: dict[EdgeType, Tensor], seeds: dict[str, Tensor]) -> Neighbourhood:
        """The graph of these edges (in build order: so ties are kept), their endpoints and the
        seeds, in the node and edge types of `data`."""
        endpoints: dict[str, list[Tensor]] = {t: [] for t in self.size}
        for node_type, nodes in seeds.items():
            endpoints[node_type].append(nodes)
        ends = {}
        edges = {t: self.in_build_order(t, index) for t, index in edges.items()}
        for edge_type, index in edges.items():
            ends[edge_type] = self.edge(edge_type, "edge_index", index)
            endpoints[edge_type[0]].append(ends[edge_type][0])
            endpoints[edge_type[2]].append(ends[edge_type][1])
        ids = {t: _union(parts) for t, parts in endpoints.items()}
        out, degree = HeteroData(), self.out_degree(ids)
        for node_type in self.data.node_types:
            store = out[node_type]
            store.num_nodes, store.global_id = len(ids[node_type]), ids[node_type]
            store.degree = degree[node_type]
            for name in NODE_ATTRIBUTES:
                store[name] = self.node(node_type, name, ids[node_type])
        for edge_type, index in edges.items():
            store, (src, dst) = out[edge_type], ends[edge_type]
            for name, _ in self.data[edge_type].items():
                if name != "edge_index":
                    store[name] = self.edge(edge_type, name, index)
            source, _, destination = edge_type
            store.edge_index = torch.stack(
                [
                    torch.searchsorted(ids[source], src.contiguous()),
                    torch.searchsorted(ids[destination], dst.contiguous()),
                ]
            )
        local = {t: torch.searchsorted(ids[t], nodes) for t, nodes in seeds.items()}
        return Neighbourhood(out, local)

    def out_degree(self, ids: dict[str, Tensor]) -> dict[str, Tensor]:
        """Edges leaving each of `ids` in the extended graph, over every edge type (float)."""
        degree = {t: torch.zeros(len(nodes)) for t, nodes in ids.items()}
        for edge_type in self.data.edge_types:
            source = edge_type[0]
            chunks = [self.data[edge_type].edge_index[0]]
            if edge_type in self.added.edge_types:
                chunks.append(self.added[edge_type].edge_index[0])
            for src in chunks:
                counts = torch.bincount(src, minlength=self.size[source])
                degree[source] += counts[ids[source]].to(degree[source].dtype)
        return degree


def _union(parts: list[Tensor]) -> Tensor:
    return torch.cat(parts).unique() if parts else torch.zeros(0, dtype=torch.long)


def _take(base: Tensor, added: Tensor | None, index: Tensor) -> Tensor:
    """Rows `index` of `base` followed by `added`, without concatenating them."""
    inside = index < len(base)
    out = base.new_empty((len(index), *base.shape[1:]))
    out[inside] = base[index[inside]]
    if added is not None:
        out[~inside] = added[index[~inside] - len(base)]
    return out


def _latest(destination: np.ndarray, usable: np.ndarray, fanout: int) -> Tensor:
    """Positions of the last `fanout` edges of each destination when sorted by usable time
    (stably: later positions win ties), as the sampler's `recent` draw takes them."""
    if fanout < 0:
        return torch.arange(len(destination))
    order = np.lexsort((usable, destination))
    _, counts = np.unique(destination[order], return_counts=True)
    row, position = ragged_arange(counts)
    return torch.from_numpy(np.sort(order[position >= counts[row] - fanout]))
