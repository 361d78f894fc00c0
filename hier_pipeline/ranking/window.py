"""What a model is judged on: the target-stage events of a time window, per user."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.ranking.metrics import UserItems


@dataclass(frozen=True)
class EvaluationWindow:
    """Shapes: users [U] (graph node ids); relevant: U rows over all items."""

    users: Tensor
    relevant: UserItems
    start: int
    end: int


def target_window(
    graph: RelationalGraph, start: int, end: int, max_users: int, seed: int = 0
) -> EvaluationWindow:
    """Users with a target-stage event in [start, end) (a fixed random subset when there are more
    than `max_users`) and, for each, the items of those events."""
    meta, data = graph.metadata, graph.data
    engaged = data[meta.engaged]
    target = (
        (engaged.edge_time >= start)
        & (engaged.edge_time < end)
        & (engaged.edge_stage == len(meta.stages) - 1)
    )
    users = torch.unique(engaged.edge_index[0, target])
    if len(users) > max_users:
        generator = torch.Generator().manual_seed(seed)
        users = users[torch.randperm(len(users), generator=generator)[:max_users]].sort().values
    position = torch.full((int(data[meta.user_type].num_nodes),), -1, dtype=torch.long)
    position[users] = torch.arange(len(users))
    pairs = target & (position[engaged.edge_index[0]] >= 0)
    num_items = int(data[meta.item_type].num_nodes)
    relevant = UserItems.from_pairs(
        position[engaged.edge_index[0, pairs]], engaged.edge_index[1, pairs], len(users), num_items
    )
    return EvaluationWindow(users, relevant, start, end)
