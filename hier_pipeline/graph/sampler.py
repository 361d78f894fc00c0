"""Temporal, disjoint neighbour sampling over a heterogeneous graph, vectorised per hop and edge type.

Leakage guarantee: for a root seed with time ``t``, an edge is reachable (at every hop) only if its
``edge_time`` and the times of both its endpoints are all strictly before ``t``. Every sampled node
belongs to exactly one root and inherits that root's time limit ("disjoint" sampling, as PyG's
``disjoint=True``), so a mini-batch never mixes the pasts of roots with different times.

Messages flow ``src -> dst`` as in PyG: to expand a node of type ``dst`` we sample among the edges
of every edge type ``(src, rel, dst)`` that point into it, and their ``src`` nodes join the next hop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import HeteroData
from torch_geometric.data.storage import EdgeStorage, NodeStorage
from torch_geometric.typing import EdgeType

from hier_pipeline.graph.csr import Strategy, TimeSortedCSR, draw_offsets

__all__ = ["SampledSubgraph", "SamplerConfig", "StageFanouts", "TemporalNeighborSampler"]


class StageFanouts(NamedTuple):
    """Caps per hop for the edges of one funnel stage, drawn apart from their relation's others.
    Why: the target stage can be rare (a coupon purchase is 1 in 77 Complete Journey purchases),
    so among a user's latest 8 edges it is seldom in view, among its own latest 32 always."""

    stage: int  # an `edge_stage` value: an index into `GraphMetadata.stages`
    fanouts: tuple[int, ...]


@dataclass(frozen=True)
class SamplerConfig:
    """How many neighbours to draw per hop (per node and edge type), and which ones.

    ``fanouts[h]`` is the cap at hop ``h + 1``; ``-1`` keeps every valid neighbour. ``uniform``
    draws without replacement among the valid neighbours; ``recent`` keeps the ones that became
    usable last (usable-from = the latest of the edge's and its two endpoints' times, which is
    ``edge_time`` itself whenever an edge is no older than its endpoints, as the graph builder
    makes them). ``seed`` fixes the sequence of samples a sampler instance produces; give each
    data-loading worker its own seed (forked copies of one sampler would draw the same samples).

    ``stage``: the edges of one funnel stage (``edge_stage``) drawn as a relation of their own,
    with caps per hop of their own; the other edges of their relation keep ``fanouts``.
    """

    fanouts: tuple[int, ...] = (10, 5)
    strategy: Strategy = "uniform"
    seed: int = 0
    stage: StageFanouts | None = None

    def as_served(self) -> SamplerConfig:
        """The same neighbourhoods as serving draws them: the latest ones, no random numbers."""
        return replace(self, strategy="recent", seed=0)

    def __post_init__(self) -> None:
        if self.stage is not None and len(self.stage.fanouts) != len(self.fanouts):
            raise ValueError(
                f"stage {self.stage.stage}'s fanouts {self.stage.fanouts} need one cap per hop,"
                f" as fanouts {self.fanouts} has"
            )


# Which edges of a relation one channel holds: every one (None), or (stage, True) that stage's
# edges, (stage, False) the others.
Selection = tuple[int, bool] | None


def stage_channels(
    store: EdgeStorage, config: SamplerConfig
) -> list[tuple[Selection, tuple[int, ...]]]:
    """The channels one edge type is drawn in, each with its caps per hop: one of every edge, or,
    with `config.stage` and staged edges, that stage's apart from the rest. The sampler and the
    arrivals path's neighbourhood (`neighbourhood.py`) both follow it."""
    if config.stage is None or "edge_stage" not in store:
        return [(None, config.fanouts)]
    stage = config.stage.stage
    return [((stage, False), config.fanouts), ((stage, True), config.stage.fanouts)]


class _Channel(NamedTuple):
    """Edges of one edge type drawn together under one cap per hop: all of them, or one stage's."""

    edge_type: EdgeType
    csr: TimeSortedCSR
    fanouts: tuple[int, ...]


@dataclass(frozen=True)
class SampledSubgraph:
    """One mini-batch: the sampled nodes and edges, in global ids and local indices.

    Every node and edge type of the source graph is present (empty when nothing was sampled), so
    ``to_hetero`` models see a fixed metadata. Seeds come first in their type, in input order.

    Shapes: ``seed_time`` [B]; per node type ``n_id``, ``root``, ``hop`` [N_t]; per edge type
    ``edge_index`` [2, E_t] (local: row indexes the src type's nodes, col the dst type's),
    ``e_id`` and ``edge_time`` [E_t].
    """

    seed_type: str
    seed_time: Tensor
    n_id: dict[str, Tensor]
    root: dict[str, Tensor]
    hop: dict[str, Tensor]
    edge_index: dict[EdgeType, Tensor]
    e_id: dict[EdgeType, Tensor]
    edge_time: dict[EdgeType, Tensor]

    @property
    def seed_local(self) -> Tensor:
        """Positions of the roots among the seed type's nodes. Shapes: [B]."""
        return torch.arange(len(self.seed_time))

    def to_hetero_data(self, source: HeteroData | None = None) -> HeteroData:
        """The mini-batch as PyG ``HeteroData``; with ``source``, its node and edge tensors too.

        Per node type: ``n_id``, ``root``, ``hop``, ``seed_time`` (the root's); per edge type:
        ``edge_index``, ``e_id``, ``edge_time``; ``data[seed_type].seed_local``. Tensors of
        ``source`` (features, ``time``) are gathered by ``n_id`` / ``e_id``.
        """
        out = HeteroData()
        for node_type, n_id in self.n_id.items():
            store = out[node_type]
            store.n_id, store.root, store.hop = n_id, self.root[node_type], self.hop[node_type]
            store.seed_time = self.seed_time[store.root]
            store.num_nodes = len(n_id)
            if source is not None:
                _gather(store, source[node_type], n_id)
        for edge_type, e_id in self.e_id.items():
            edges = out[edge_type]
            edges.edge_index, edges.e_id = self.edge_index[edge_type], e_id
            edges.edge_time = self.edge_time[edge_type]
            if source is not None:
                _gather(edges, source[edge_type], e_id)
        out[self.seed_type].seed_local = self.seed_local
        return out


def _gather(
    target: NodeStorage | EdgeStorage, source: NodeStorage | EdgeStorage, index: Tensor
) -> None:
    """Copy the source's per-node or per-edge tensors at ``index``, except those already set."""
    for key, value in source.items():
        per_row = source.is_node_attr(key) or source.is_edge_attr(key)
        if isinstance(value, Tensor) and per_row and key not in target:
            target[key] = value[index]


class _Frontier(NamedTuple):
    """Nodes first reached at the latest hop. Shapes: all [M]."""

    gid: np.ndarray
    root: np.ndarray
    local: np.ndarray


class _NodeSet:
    """The nodes of one type sampled so far, one per (root, global id) pair, in a sorted key index."""

    def __init__(self, num_nodes: int) -> None:
        self.stride = max(num_nodes, 1)
        self.keys = np.empty(0, dtype=np.int64)
        self.local = np.empty(0, dtype=np.int64)
        self.gid, self.root, self.hop = [self.keys], [self.keys], [self.keys]
        self.size = 0

    def add(self, gid: np.ndarray, root: np.ndarray, hop: int) -> tuple[np.ndarray, _Frontier]:
        """Local index of each (gid, root) pair, creating the unseen ones; and those new nodes.

        Shapes: ``gid``, ``root`` [C] -> (local [C], frontier of the new nodes).
        """
        unique, inverse = np.unique(root * self.stride + gid, return_inverse=True)
        at = np.searchsorted(self.keys, unique)
        known = at < len(self.keys)
        known[known] = self.keys[at[known]] == unique[known]
        local = np.empty(len(unique), dtype=np.int64)
        local[known] = self.local[at[known]]
        fresh = ~known
        local[fresh] = self.size + np.arange(int(fresh.sum()))
        self.keys = np.insert(self.keys, at[fresh], unique[fresh])
        self.local = np.insert(self.local, at[fresh], local[fresh])
        new_root, new_gid = np.divmod(unique[fresh], self.stride)
        self.gid.append(new_gid)
        self.root.append(new_root)
        self.hop.append(np.full(len(new_gid), hop, dtype=np.int64))
        self.size += len(new_gid)
        return local[inverse], _Frontier(new_gid, new_root, local[fresh])

    def tensors(self) -> tuple[Tensor, Tensor, Tensor]:
        """Global ids, roots and hops of all nodes, in local-index order. Shapes: 3 x [N_t]."""
        gid, root, hop = (np.concatenate(p) for p in (self.gid, self.root, self.hop))
        return torch.from_numpy(gid), torch.from_numpy(root), torch.from_numpy(hop)


def _required(store: object, key: str, name: object) -> np.ndarray:
    """A tensor attribute as int64 numpy, or a clear error: without times there is no guarantee."""
    value = getattr(store, key, None)
    if not isinstance(value, Tensor):
        raise ValueError(f"{name} has no '{key}' tensor; the temporal sampler needs it")
    return value.to(torch.int64).numpy()


class TemporalNeighborSampler:
    """Samples temporal, disjoint k-hop neighbourhoods from a ``HeteroData`` graph.

    Builds once, per edge type, a CSR over destination nodes whose incoming edges are sorted by
    the time they became usable (``TimeSortedCSR``). Each hop, for each edge type, one vectorised
    binary search finds every frontier node's valid prefix and one vectorised draw picks up to
    ``fanout`` of its edges: no Python loop over seeds, nodes or edges.

    Args:
        data: every node type has ``num_nodes`` and ``time`` (int64 [N]); every edge type has
            ``edge_index`` (int64 [2, E]) and ``edge_time`` (int64 [E]). The "known since always"
            sentinel (int64 min) needs no special case: it is before every seed time.
        config: fanouts, strategy and random seed.
    """

    def __init__(self, data: HeteroData, config: SamplerConfig = SamplerConfig()) -> None:
        self.config = config
        self.num_nodes = {t: int(data[t].num_nodes) for t in data.node_types}
        node_time = {t: _required(data[t], "time", t) for t in data.node_types}
        self.edge_time: dict[EdgeType, np.ndarray] = {}
        self.channels: list[_Channel] = []
        for edge_type in data.edge_types:
            src, _, dst = edge_type
            edge_time = _required(data[edge_type], "edge_time", edge_type)
            self.edge_time[edge_type] = edge_time
            edge_index = _required(data[edge_type], "edge_index", edge_type)
            store = data[edge_type]
            for selection, fanouts in stage_channels(store, config):
                if selection is None:
                    csr = TimeSortedCSR.build(edge_index, edge_time, node_time[src], node_time[dst])
                else:
                    stage, apart = selection
                    edges = np.flatnonzero((store.edge_stage.numpy() == stage) == apart)
                    csr = TimeSortedCSR.build(
                        edge_index[:, edges], edge_time[edges], node_time[src], node_time[dst]
                    ).renumbered(edges)
                self.channels.append(_Channel(edge_type, csr, fanouts))
        self.rng = np.random.default_rng(config.seed)

    def sample(
        self,
        seed_type: str,
        seed_nodes: Tensor,
        seed_time: Tensor,
        strategy: Strategy | None = None,
    ) -> SampledSubgraph:
        """The neighbourhoods of ``seed_nodes``, each limited to edges before its ``seed_time``.

        A seed listed twice is two roots (two disjoint neighbourhoods). ``strategy`` overrides
        the config's for this call, so training and inference share one index.

        Shapes: ``seed_nodes``, ``seed_time`` [B] (int64) -> ``SampledSubgraph`` with B roots.
        """
        seeds = seed_nodes.to(torch.int64).numpy()
        limit = seed_time.to(torch.int64).numpy()
        if seeds.shape != limit.shape or seeds.ndim != 1:
            raise ValueError("seed_nodes and seed_time must be 1-D and of the same length")
        nodes = {t: _NodeSet(n) for t, n in self.num_nodes.items()}
        _, first = nodes[seed_type].add(seeds, np.arange(len(seeds), dtype=np.int64), hop=0)
        frontier = {seed_type: first}
        empty = np.empty(0, dtype=np.int64)
        parts: dict[EdgeType, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
            edge_type: [(empty, empty, empty)] for edge_type in self.edge_time
        }
        for hop in range(1, len(self.config.fanouts) + 1):
            reached: dict[str, list[_Frontier]] = {}
            for edge_type, csr, fanouts in self.channels:
                src, _, dst = edge_type
                if dst not in frontier:
                    continue
                gid, root, local = frontier[dst]
                start, count = csr.valid_range(gid, limit[root])
                row, offset = draw_offsets(
                    count, fanouts[hop - 1], strategy or self.config.strategy, self.rng
                )
                position = start[row] + offset
                src_local, new = nodes[src].add(csr.src[position], root[row], hop)
                parts[edge_type].append((src_local, local[row], csr.e_id[position]))
                reached.setdefault(src, []).append(new)
            frontier = {
                t: _Frontier(*(np.concatenate(column) for column in zip(*found, strict=True)))
                for t, found in reached.items()
            }
        return self._assemble(seed_type, seed_time.to(torch.int64).clone(), nodes, parts)

    def _assemble(
        self,
        seed_type: str,
        seed_time: Tensor,
        nodes: dict[str, _NodeSet],
        parts: dict[EdgeType, list[tuple[np.ndarray, np.ndarray, np.ndarray]]],
    ) -> SampledSubgraph:
        """Concatenate the per-hop pieces into tensors. Shapes: see ``SampledSubgraph``."""
        n_id, root, hop = {}, {}, {}
        for node_type, node_set in nodes.items():
            n_id[node_type], root[node_type], hop[node_type] = node_set.tensors()
        edge_index, e_id, edge_time = {}, {}, {}
        for edge_type, pieces in parts.items():
            src_local, dst_local, ids = (np.concatenate(c) for c in zip(*pieces, strict=True))
            edge_index[edge_type] = torch.from_numpy(np.stack([src_local, dst_local]))
            e_id[edge_type] = torch.from_numpy(ids)
            edge_time[edge_type] = torch.from_numpy(self.edge_time[edge_type][ids])
        return SampledSubgraph(
            seed_type=seed_type,
            seed_time=seed_time,
            n_id=n_id,
            root=root,
            hop=hop,
            edge_index=edge_index,
            e_id=e_id,
            edge_time=edge_time,
        )
