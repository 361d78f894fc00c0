"""Bags of Meaning from what an entity engaged with: a user's tokens are the codes of the items
they viewed, clicked, carted and bought, each event weighted by its funnel stage and its recency.

Why not the user's embedding alone: an embedding averages a user into one point, and its nearest
primitives are the interests around that point, which for a user of two unrelated interests is
neither. The events name the interests themselves, at every level, and they weigh a purchase
over a view and last week over last season. A user without events is placed by embedding.

An advertiser's bag is the same sum over the events on its products (`owned_events`): the
interests its catalogue serves as people engage with it, weighted by what they buy and lately,
where its embedding (one point of its text and neighbourhood) places a shop of sofas and coffee
makers between the two. An advertiser without such events is placed by its catalogue, each of
its products alike (`catalogue_events`: a new product has its code from its content), and one
without products by embedding.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from hier_pipeline.interests.events import FunnelEvents, catalogue_events, owned_events
from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.tokens import (
    TokenBags,
    TokenConfig,
    assign_tokens,
    bags_by,
    code_bags,
)

DAY = 86_400


def recency(events: FunnelEvents, as_of: int, half_life_days: float) -> Tensor:
    """2 ** (-age / half-life) per event as of `as_of`. Shapes: -> [E] float64."""
    age = (as_of - events.time).clamp_min(0).double()
    return torch.exp2(-age / (half_life_days * DAY))


def event_weights(events: FunnelEvents, as_of: int, config: TokenConfig) -> Tensor:
    """stage_base ** stage x 2 ** (-age / half-life) per event. Shapes: -> [E] float64."""
    return config.stage_base ** events.stage.double() * recency(
        events, as_of, config.half_life_days
    )


def engaged_tokens(
    vectors: Tensor,
    events: FunnelEvents,
    codes: Tensor,
    hierarchy: InterestHierarchy,
    config: TokenConfig,
    as_of: int,
    fallback: TokenBags | None = None,
) -> TokenBags:
    """The bag of every row of `vectors` from its `events` (their `users` index the rows, their
    `items` index `codes`, the items' primitives per level), weights proportional to the summed
    event weights per level; rows without an event before `as_of` get their row of `fallback`
    (default: `assign_tokens`' bag by embedding).

    Shapes: vectors [N, d], codes [items, L] -> TokenBags of N rows.
    """
    kept = events.time < as_of
    users, items = events.users[kept], events.items[kept]
    weight = event_weights(events, as_of, config)[kept]
    order = torch.argsort(users, stable=True)
    users, items, weight = users[order], items[order], weight[order]
    level_of = hierarchy.level_of()

    def scores(rows: slice, span: slice) -> Tensor:
        lo, hi = torch.searchsorted(users, torch.tensor([rows.start, rows.stop])).tolist()
        code = codes[items[lo:hi], int(level_of[span.start])] - span.start
        summed = torch.zeros(rows.stop - rows.start, span.stop - span.start, dtype=torch.float64)
        summed.index_put_((users[lo:hi] - rows.start, code), weight[lo:hi], accumulate=True)
        return summed.masked_fill(summed <= 0, -torch.inf)

    def weigh(values: Tensor) -> Tensor:
        mass = values.clamp_min(0).nan_to_num(neginf=0.0)
        return (mass / mass.sum(dim=1, keepdim=True).clamp_min(1e-300)).float()

    bags = bags_by(scores, weigh, len(vectors), hierarchy, config.top_k)
    silent = torch.bincount(users, minlength=len(vectors)) == 0
    if silent.any():
        if fallback is None:
            placed = assign_tokens(vectors[silent], hierarchy, config)
        else:
            placed = fallback.rows(silent)
        bags.path[silent], bags.tokens[silent] = placed.path, placed.tokens
        bags.weights[silent] = placed.weights
    return bags


def owner_tokens(
    vectors: Tensor,
    events: FunnelEvents,
    owner: Tensor,
    codes: Tensor,
    hierarchy: InterestHierarchy,
    config: TokenConfig,
    as_of: int,
) -> TokenBags:
    """The bags of the owners of items (advertisers): from the events on their items, else from
    their catalogue, else by embedding (module doc). `events.users` are users, `owner` maps
    each item (a row of `codes`) to its owner's row of `vectors`, -1 for none.
    Shapes: vectors [N, d], owner [items], codes [items, L] -> TokenBags of N rows."""
    catalogue = engaged_tokens(
        vectors, catalogue_events(owner, as_of), codes, hierarchy, config, as_of
    )
    mine = owned_events(events, owner)
    return engaged_tokens(vectors, mine, codes, hierarchy, config, as_of, catalogue)


def entity_bags(
    vectors: Mapping[str, Tensor],
    hierarchy: InterestHierarchy,
    events: FunnelEvents,
    roles: Mapping[str, str],
    config: TokenConfig,
    as_of: int,
    owners: Mapping[str, Tensor] | None = None,
) -> dict[str, TokenBags]:
    """Every entity type's bags: the tree's items are their codes, users are placed by their
    events before `as_of` (`engaged_tokens`), an entity type of `owners` (node type -> each
    item's owner row, `item_owners`) by the events on its items or else its catalogue
    (`owner_tokens`), others by their embeddings. `roles`: "user" / "item" -> node type."""
    bags, owners = {}, owners or {}
    for node_type, rows in vectors.items():
        if node_type == roles["item"]:
            bags[node_type] = code_bags(hierarchy.members, config.top_k)
        elif node_type == roles["user"]:
            bags[node_type] = engaged_tokens(
                rows, events, hierarchy.members, hierarchy, config, as_of
            )
        elif node_type in owners:
            bags[node_type] = owner_tokens(
                rows, events, owners[node_type], hierarchy.members, hierarchy, config, as_of
            )
        else:
            bags[node_type] = assign_tokens(rows, hierarchy, config)
    return bags
