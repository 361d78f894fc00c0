"""What a model's hits are made of: positives it could replay from the user's own history
(*repeat*: items the user engaged with before the window) and positives new to the user
(*explore*). A model that only replays history scores well on repeat and near zero on explore;
learned interest shows on explore. `history_share@k` says how much of a top k is the user's own
history: near 1 is a buy-again list, whatever its recall.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.ranking.metrics import UserItems, ranking_metrics

REPEAT, EXPLORE = "repeat", "explore"
SEGMENT_K = 50


def engaged_before(graph: RelationalGraph, users: Tensor, before: int) -> UserItems:
    """Each of `users`' items with a positive funnel event (any stage) before `before`.

    Shapes: users [U] node ids -> U rows."""
    meta, data = graph.metadata, graph.data
    engaged = data[meta.engaged]
    position = torch.full((int(data[meta.user_type].num_nodes),), -1, dtype=torch.long)
    position[users] = torch.arange(len(users))
    keep = (
        (engaged.edge_time < before)
        & (engaged.edge_stage >= 0)
        & ~engaged.edge_negative
        & (position[engaged.edge_index[0]] >= 0)
    )
    num_items = int(data[meta.item_type].num_nodes)
    rows = position[engaged.edge_index[0, keep]]
    return UserItems.from_pairs(rows, engaged.edge_index[1, keep], len(users), num_items)


def split_relevant(relevant: UserItems, seen: UserItems) -> dict[str, UserItems]:
    """The relevant items of each user that they had engaged with (`REPEAT`) and the rest
    (`EXPLORE`); both over the same rows as `relevant`."""
    row, item = relevant.rows(0, relevant.num_users)
    repeated = torch.isin(relevant.keys(), seen.keys())
    users, items = relevant.num_users, relevant.num_items
    return {
        REPEAT: UserItems.from_pairs(row[repeated], item[repeated], users, items),
        EXPLORE: UserItems.from_pairs(row[~repeated], item[~repeated], users, items),
    }


def segment_recall(topk: Tensor, segments: dict[str, UserItems]) -> dict[str, float]:
    """recall@SEGMENT_K on each segment's positives (users without any in a segment are skipped
    there, as everywhere). Shapes: topk [U, >= SEGMENT_K]."""
    top = topk[:, :SEGMENT_K]
    return {
        name: ranking_metrics(top, items, (SEGMENT_K,))[f"recall@{SEGMENT_K}"]
        for name, items in segments.items()
    }


def history_share(topk: Tensor, seen: UserItems, k: int = SEGMENT_K) -> float:
    """The mean share of each user's top k that they had engaged with before; NaN without users.

    Shapes: topk [U, >= k]."""
    if len(topk) == 0:
        return float("nan")
    return seen.contains(topk[:, :k]).float().mean().item()
