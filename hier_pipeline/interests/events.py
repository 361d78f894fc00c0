"""The positive funnel events the interests stage learns from: who engaged with which item, at
which stage, when. One reader for the super-graph, the tree's coarse levels and the users' bags."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:  # the graph package pulls in PyG; queries that load a SuperGraph do not need it
    from torch_geometric.data import HeteroData
    from torch_geometric.data.storage import EdgeStorage

    from hier_pipeline.graph.build import RelationalGraph


@dataclass(frozen=True)
class FunnelEvents:
    """Shapes: users, items, stage (0 = shallowest), time (epoch seconds): [E] each."""

    users: Tensor
    items: Tensor
    stage: Tensor
    time: Tensor

    def __len__(self) -> int:
        return len(self.users)

    @staticmethod
    def concat(parts: list[FunnelEvents]) -> FunnelEvents:
        """The events of `parts`, one after another."""
        return FunnelEvents(
            *(torch.cat([getattr(part, f.name) for part in parts]) for f in fields(FunnelEvents))
        )

    def where(self, keep: Tensor) -> FunnelEvents:
        """The events where `keep` holds. Shapes: keep [E] bool."""
        return FunnelEvents(self.users[keep], self.items[keep], self.stage[keep], self.time[keep])

    def of_users(self, users: Tensor) -> FunnelEvents:
        """The events of `users` only, each user renumbered to its position in `users`."""
        row = positions(users, self.users)
        kept = self.where(row >= 0)
        return replace(kept, users=row[row >= 0])


def positions(nodes: Tensor, looked_up: Tensor) -> Tensor:
    """Each of `looked_up`'s position in `nodes` (distinct), -1 where it is not there.
    Shapes: nodes [S], looked_up [M] -> [M]; negative entries of `looked_up` give -1."""
    largest = int(torch.cat([nodes, looked_up]).max()) if len(nodes) or len(looked_up) else -1
    position = torch.full((largest + 1,), -1, dtype=torch.long)
    position[nodes] = torch.arange(len(nodes))
    return torch.where(looked_up >= 0, position[looked_up.clamp_min(0)], -1)


def funnel_events(graph: RelationalGraph, before: int | None = None) -> FunnelEvents:
    """Every positive funnel event of the `engaged` edges (no "not interested"), strictly before
    `before` if given."""
    return engaged_events(graph.data[graph.metadata.engaged], before)


def engaged_events(engaged: EdgeStorage, before: int | None = None) -> FunnelEvents:
    """`funnel_events` of one store of `engaged` edges: the graph's, or an arrival batch's."""
    keep = (engaged.edge_stage >= 0) & ~engaged.edge_negative
    if before is not None:
        keep &= engaged.edge_time < before
    return FunnelEvents(
        engaged.edge_index[0, keep],
        engaged.edge_index[1, keep],
        engaged.edge_stage[keep],
        engaged.edge_time[keep],
    )


def item_owners(graph: RelationalGraph, owner_type: str) -> Tensor | None:
    """Each item's row of `owner_type` by the item table's foreign key to it (a product's
    advertiser; -1 where the key is null), or None where the item table has no such key (with
    several, the first by name). Shapes: -> [items]."""
    item = graph.metadata.item_type
    return parent_rows(graph.data, item, owner_type, int(graph.data[item].num_nodes))


def parent_rows(
    data: HeteroData, child: str, parent: str, children: int, first: int = 0
) -> Tensor | None:
    """`item_owners` of `data`'s child nodes `first` ... `first + children - 1` (an arrival
    batch's rows hold the graph's indices from its first node on), or None without such a key.
    Shapes: -> [children]."""
    keys = sorted(
        edge
        for edge in data.edge_types
        if edge[0] == child and edge[2] == parent and not edge[1].startswith("rev_")
    )
    if not keys:
        return None
    of_child, of_parent = data[keys[0]].edge_index
    owner = torch.full((children,), -1, dtype=torch.long)
    owner[of_child - first] = of_parent
    return owner


def owned_events(events: FunnelEvents, owner: Tensor) -> FunnelEvents:
    """The events on items as their owners' own: `users` becomes the item's owner (`item_owners`);
    events on an item without one are left out. Shapes: owner [items]."""
    by = owner[events.items]
    kept = events.where(by >= 0)
    return replace(kept, users=by[by >= 0])


def catalogue_events(owner: Tensor, as_of: int) -> FunnelEvents:
    """An owner's catalogue as events: one per owned item, of the shallowest stage, just before
    `as_of`, so each item weighs alike. An advertiser nobody engaged with yet (a new one, its
    products new too) is placed by the codes of what it sells, which a new product has from its
    content, rather than by one point of its embedding. Items without an owner (-1) are left
    out. Shapes: owner [items] (`item_owners`)."""
    items = torch.nonzero(owner >= 0).flatten()
    return FunnelEvents(
        owner[items],
        items,
        torch.zeros_like(items),
        torch.full_like(items, as_of - 1),
    )


def no_events() -> FunnelEvents:
    """No event at all: every entity is placed by its embedding."""
    empty = torch.zeros(0, dtype=torch.long)
    return FunnelEvents(empty, empty, empty, empty)
