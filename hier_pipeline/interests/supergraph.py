"""The interest super-graph: primitives as nodes, co-engagement and parent/child edges.

Every funnel event (user u, item i, stage s) adds base**s (deeper stages weigh more) to the pair
(path of u, path of i) at each level. A pair is kept when it co-occurs more than chance:
PMI = log(W_ab W / (W_a W_b)) > 0, with W_a, W_b the user-side and item-side totals and W the
level's total. Parent -> child edges come from the tree. Millions of users and items become a few
thousand primitives, so the graph is dense where the raw user-item graph is sparse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from hier_pipeline.interests.events import funnel_events
from hier_pipeline.interests.hierarchy import InterestHierarchy

if TYPE_CHECKING:  # the graph package pulls in PyG; queries that load a SuperGraph do not need it
    from hier_pipeline.graph.build import RelationalGraph


@dataclass(frozen=True)
class SuperGraph:
    """Co-engagement edges user-side primitive -> item-side primitive (same level, self-loops
    allowed) and the tree's parent -> child edges, all in the hierarchy's primitive indices.

    Shapes: edge_index [2, E], weight [E] (stage-weighted events), pmi [E] > 0, tree [2, T - K0].
    """

    edge_index: Tensor
    weight: Tensor
    pmi: Tensor
    tree: Tensor


def build_supergraph(
    graph: RelationalGraph,
    user_path: Tensor,
    item_path: Tensor,
    hierarchy: InterestHierarchy,
    stage_base: float = 2.0,
) -> SuperGraph:
    """Shapes: user_path [U, L], item_path [I, L] (each entity's primitive per level)."""
    events = funnel_events(graph)
    users, items = events.users, events.items
    weight = stage_base ** events.stage.double()
    num = len(hierarchy.parent)
    sources, targets = user_path[users].flatten(), item_path[items].flatten()
    weights = weight.repeat_interleave(hierarchy.levels)
    pair, inverse = torch.unique(sources * num + targets, return_inverse=True)
    total = torch.zeros(len(pair), dtype=torch.float64).index_add_(0, inverse, weights)
    source, target = pair // num, pair % num
    out = torch.zeros(num, dtype=torch.float64).index_add_(0, source, total)
    into = torch.zeros(num, dtype=torch.float64).index_add_(0, target, total)
    level = hierarchy.level_of()[source]
    per_level = torch.zeros(hierarchy.levels, dtype=torch.float64).index_add_(0, level, total)
    pmi = torch.log(total * per_level[level] / (out[source] * into[target]))
    keep = pmi > 0
    children = (hierarchy.parent >= 0).nonzero().flatten()
    return SuperGraph(
        torch.stack([source[keep], target[keep]]),
        total[keep].float(),
        pmi[keep].float(),
        torch.stack([hierarchy.parent[children], children]),
    )


def supergraph_stats(
    supergraph: SuperGraph, hierarchy: InterestHierarchy, graph: RelationalGraph
) -> list[dict[str, float]]:
    """Per level against the raw user-item graph: nodes, edges, density = edges / nodes^2 (raw:
    distinct engaged user-item pairs / (users x items)), and the share of primitives with a
    self-loop (their users engage their items more than chance: a coherent interest)."""
    events = funnel_events(graph)
    users, items = events.users, events.items
    meta = graph.metadata
    num_users, num_items = (int(graph.data[t].num_nodes) for t in (meta.user_type, meta.item_type))
    raw_pairs = len(torch.unique(users * num_items + items))
    raw_density = raw_pairs / max(1, num_users * num_items)
    level_of = hierarchy.level_of()
    edge_level = level_of[supergraph.edge_index[0]]
    self_loop = supergraph.edge_index[0] == supergraph.edge_index[1]
    rows = []
    for level in range(hierarchy.levels):
        nodes = int((level_of == level).sum())
        at_level = edge_level == level
        edges = int(at_level.sum())
        rows.append(
            {
                "level": level,
                "nodes": nodes,
                "edges": edges,
                "density": edges / nodes**2,
                "raw_nodes": num_users + num_items,
                "raw_edges": raw_pairs,
                "raw_density": raw_density,
                "density_ratio": edges / nodes**2 / raw_density if raw_density else float("inf"),
                "self_loop_share": int((at_level & self_loop).sum()) / nodes,
            }
        )
    return rows
