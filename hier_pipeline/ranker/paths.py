"""Relational paths: how the rest of the database connects a user to an item, as ranker signals.

Why. The counts, the embedding and the tokens read a user's own events. A relational database
says more: on Complete Journey a household is targeted by campaigns whose coupons name products
(household -> campaign_targets -> campaigns -> coupons -> products), and the target stage is a
purchase with a coupon; on the synthetic world a user's events on an advertiser's campaigns
reach that advertiser's other products. No practitioner's baseline reads these links, and they
exist for a product without a single event (a new product with a coupon), so they are what a
relational model should add. Schema-agnostic: the paths are found in the foreign-key graph, not
named per dataset.

A path is a walk of at most `MAX_HOPS` foreign-key edges from the user type to the item type that
visits no node type twice and does not come back to the user type; the direct event path (user
-> funnel event row -> item) is left out, since the counts read it. Its score for (u, i):

    log1p( sum over the path's walks from u to i of the product of their nodes' weights )

where a node with a time weighs 2^(-age / `half_life_days`) as of the scoring time and 0 from that
time on (a campaign not yet started, a future redemption: the past only), and a node without one
weighs 1. Computed without a users x rows intermediate: each path is cut at its narrowest node
type, the users' side summed into users x that type and the items' side into that type x items
(both sparse, bounded by the tables' rows), and a block of users' scores is their product.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sparse
import torch
from torch import Tensor
from torch_geometric.typing import EdgeType

from hier_pipeline.graph.build import ENGAGED, NEVER, RelationalGraph

MAX_HOPS = 4
MAX_PATHS = 8  # the shortest first: each path adds two ranker features and its top list
DAY_SECONDS = 86_400.0
PREFIX = "path:"  # of every path's signal name


@dataclass(frozen=True)
class SchemaPath:
    """A chain of foreign-key edge types from the user type to the item type."""

    edges: tuple[EdgeType, ...]

    @property
    def node_types(self) -> list[str]:
        return [self.edges[0][0], *(edge[2] for edge in self.edges)]

    @property
    def name(self) -> str:
        """The signal's name: the tables between user and item, e.g. `path:events>campaigns`."""
        return PREFIX + ">".join(self.node_types[1:-1])


def schema_paths(graph: RelationalGraph, max_hops: int = MAX_HOPS) -> list[SchemaPath]:
    """The graph's user -> item paths (module doc), at most `MAX_PATHS`, shortest first, then
    by name; where two paths pass the same tables, the first by edge names."""
    meta = graph.metadata
    edges = sorted(e for e in graph.data.edge_types if ENGAGED not in e[1])
    found: list[SchemaPath] = []

    def walk(path: tuple[EdgeType, ...], visited: tuple[str, ...]) -> None:
        here = visited[-1]
        if here == meta.item_type and path:
            direct_event = len(path) == 2 and visited[1] in meta.event_tables
            if not direct_event:
                found.append(SchemaPath(path))
            return
        if len(path) == max_hops:
            return
        for edge in edges:
            if edge[0] == here and edge[2] not in visited:
                walk((*path, edge), (*visited, edge[2]))

    walk((), (meta.user_type,))
    found.sort(key=lambda path: (len(path.edges), path.name, path.edges))
    unique = {path.name: path for path in reversed(found)}  # one per table sequence: the first
    return sorted(unique.values(), key=lambda path: (len(path.edges), path.name))[:MAX_PATHS]


class PathScores:
    """A path's scores of the ranked `users` as of `as_of` (module doc): a ranker `Signal`.

    Shapes: users [U] node ids; __call__(rows [R] indexing `users`) -> [R, items]."""

    def __init__(
        self,
        graph: RelationalGraph,
        path: SchemaPath,
        users: Tensor,
        as_of: int,
        half_life_days: float,
    ) -> None:
        data, types = graph.data, path.node_types
        steps = [
            _adjacency(graph, edge)
            @ sparse.diags(_node_weights(graph, edge[2], as_of, half_life_days))
            for edge in path.edges
        ]
        sizes = [int(data[t].num_nodes) for t in types[1:-1]]
        cut = int(np.argmin(sizes)) + 1 if sizes else 1  # steps[:cut] end at the narrowest type
        left = steps[0][users.numpy()]
        for step in steps[1:cut]:
            left = left @ step
        right = steps[-1]
        for step in reversed(steps[cut:-1]):
            right = step @ right
        self.left = sparse.csr_matrix(left)
        self.right = sparse.csr_matrix(right) if cut < len(steps) else None

    def __call__(self, rows: Tensor) -> Tensor:
        block = self.left[rows.numpy()]
        if self.right is not None:
            block = block @ self.right
        return torch.from_numpy(np.log1p(block.toarray())).float()


def _adjacency(graph: RelationalGraph, edge: EdgeType) -> sparse.csr_matrix:
    """The edge type's links, source nodes x target nodes, one per edge."""
    source, target = graph.data[edge].edge_index.numpy()
    shape = (int(graph.data[edge[0]].num_nodes), int(graph.data[edge[2]].num_nodes))
    return sparse.csr_matrix((np.ones(len(source)), (source, target)), shape=shape)


def _node_weights(
    graph: RelationalGraph, node_type: str, as_of: int, half_life_days: float
) -> np.ndarray:
    """Per node of the type: 1 without a time (and for every item), else its decay as of `as_of`,
    0 from `as_of` on. Shapes: -> [nodes] float64."""
    time = graph.data[node_type].time.numpy()
    if node_type == graph.metadata.item_type:
        return np.ones(len(time))
    age_days = (as_of - time.astype(np.float64)) / DAY_SECONDS
    decayed = np.where(time < as_of, np.exp2(-np.clip(age_days, 0.0, None) / half_life_days), 0.0)
    return np.where(time == NEVER, 1.0, decayed)
