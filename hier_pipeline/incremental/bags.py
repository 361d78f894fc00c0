"""The bags an arrival batch serves, placed as a full run places them: a product by its code (an
item of the tree keeps its own, a new one gets it from its content and embedding through the
tree's finest codebook), a user by the codes of the items they engaged with, an advertiser by
the events on its products or else by its catalogue (`interests/engaged.py`), anything else by
its embedding.

The events and catalogues are the dataset's and the batches' together, each item under its
code: the tree's own, the ones this batch embeds (its new items and the earlier ones its rows
point at), and the codes earlier batches served for their items under the same tree. An item
no batch served under it (a batch that came before the release of the tree and is not caught
up) is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.incremental.extend import BatchRows
from hier_pipeline.interests.engaged import engaged_tokens, owner_tokens
from hier_pipeline.interests.events import (
    FunnelEvents,
    engaged_events,
    funnel_events,
    owned_events,
    parent_rows,
    positions,
)
from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.tokens import TokenBags, TokenConfig, assign_tokens, code_bags

UNKNOWN = -1  # an item whose code this batch does not know


@dataclass(frozen=True)
class ArrivalBags:
    bags: dict[str, TokenBags]  # node type -> the seeds' bags, in their order
    # node type -> how many were placed by each way: "code" (items), "events", "catalogue"
    # (advertisers without events on their products), "embedding"
    placed_by: dict[str, dict[str, int]]


def arrival_bags(
    tree: InterestHierarchy,
    config: TokenConfig,
    graph: RelationalGraph,
    batch: BatchRows,
    seeds: Mapping[str, Tensor],
    vectors: Mapping[str, Tensor],
    content: Mapping[str, Mapping[str, Tensor]],
    served_items: tuple[Tensor, Tensor] | None = None,
) -> ArrivalBags:
    """The bags of the embedded `seeds` (node type -> nodes of the graph extended by the
    batches), in their order (module doc); `served_items`: earlier batches' items this one does
    not embed, with the codes served for them. Shapes: seeds[t] [N_t], vectors[t] [N_t, d],
    served_items ([M], [M, L])."""
    meta = graph.metadata
    item = meta.item_type
    codes = _item_codes(tree, graph, batch, seeds.get(item), vectors.get(item), content.get(item))
    if served_items is not None:
        codes[served_items[0]] = served_items[1]
    events = _events(graph, batch)
    events = events.where(codes[events.items, 0] != UNKNOWN)
    as_of = int(events.time.max()) + 1 if len(events) else 0
    owners = None
    if meta.advertiser_type is not None and meta.advertiser_type in seeds:
        owners = _owners(graph, batch, meta.advertiser_type, seeds[meta.advertiser_type])
    bags, placed_by = {}, {}
    for node_type, rows in vectors.items():
        if node_type == item:
            bags[node_type] = code_bags(codes[seeds[item]], config.top_k)
            placed_by[node_type] = {"code": len(rows)}
        elif node_type == meta.user_type:
            mine = events.of_users(seeds[node_type])
            bags[node_type] = engaged_tokens(rows, mine, codes, tree, config, as_of)
            placed_by[node_type] = _tally(len(rows), {"events": mine.users})
        elif node_type == meta.advertiser_type and owners is not None:
            owner = owners.masked_fill(codes[:, 0] == UNKNOWN, -1)
            bags[node_type] = owner_tokens(rows, events, owner, codes, tree, config, as_of)
            placed_by[node_type] = _tally(
                len(rows),
                {"events": owned_events(events, owner).users, "catalogue": owner[owner >= 0]},
            )
        else:
            bags[node_type] = assign_tokens(rows, tree, config)
            placed_by[node_type] = {"embedding": len(rows)}
    return ArrivalBags(bags, placed_by)


def _tally(count: int, evidence: Mapping[str, Tensor]) -> dict[str, int]:
    """How many of `count` rows each way places: the first in `evidence` (way -> the rows it
    has something for, repeats allowed) that has something for a row, else "embedding"."""
    left = torch.ones(count, dtype=torch.bool)
    tally = {}
    for way, rows in evidence.items():
        found = left & (torch.bincount(rows, minlength=count) > 0)
        tally[way] = int(found.sum())
        left &= ~found
    return {**tally, "embedding": int(left.sum())}


def _item_codes(
    tree: InterestHierarchy,
    graph: RelationalGraph,
    batch: BatchRows,
    nodes: Tensor | None,
    vectors: Tensor | None,
    content: Mapping[str, Tensor] | None,
) -> Tensor:
    """Every item's code over the extended graph (`UNKNOWN` where this batch has none): the
    tree's own, and the embedded `nodes` that arrived after it grew from their content and
    embedding (`InterestHierarchy.item_codes`). Shapes: -> [items of the extended graph, L]."""
    item = graph.metadata.item_type
    total = int(graph.data[item].num_nodes)
    if item in batch.rows.node_types:
        total = batch.first[item] + int(batch.rows[item].num_nodes)
    codes = torch.full((total, tree.levels), UNKNOWN, dtype=torch.long)
    codes[: len(tree.members)] = tree.members
    if nodes is not None and vectors is not None:
        later = nodes >= len(tree.members)
        rows = None if content is None else {k: v[nodes[later]] for k, v in content.items()}
        codes[nodes[later]] = tree.item_codes(vectors[later], rows)
    return codes


def _events(graph: RelationalGraph, batch: BatchRows) -> FunnelEvents:
    """The positive funnel events of the dataset and of every accepted batch."""
    events = funnel_events(graph)
    engaged = graph.metadata.engaged
    if engaged not in batch.rows.edge_types:
        return events
    return FunnelEvents.concat([events, engaged_events(batch.rows[engaged])])


def _owners(graph: RelationalGraph, batch: BatchRows, owner_type: str, seeds: Tensor) -> Tensor:
    """Each item's owner among the embedded `seeds` (its position there, -1 for another owner
    or none), over the extended graph's items. Shapes: seeds [S] -> [items of the extended graph]."""
    item = graph.metadata.item_type

    def parents(data: HeteroData, count: int, first: int = 0) -> Tensor:
        found = parent_rows(data, item, owner_type, count, first)
        return torch.full((count,), -1, dtype=torch.long) if found is None else found

    owner = parents(graph.data, int(graph.data[item].num_nodes))
    if item in batch.rows.node_types:
        added = parents(batch.rows, int(batch.rows[item].num_nodes), batch.first[item])
        owner = torch.cat([owner, added])
    return positions(seeds, owner)
