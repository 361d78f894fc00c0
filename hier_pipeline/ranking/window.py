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
    graph: RelationalGraph,
    start: int,
    end: int,
    max_users: int,
    seed: int = 0,
    stages: int = 1,
) -> EvaluationWindow:
    """Users with a target-stage event in [start, end) (a fixed random subset when there are more
    than `max_users`) and, for each, the items of those events. With `stages` > 1 an event of any
    of the `stages` deepest funnel stages counts (a shallower stage standing in for a sparse
    target, `hier_pipeline.evaluation.ours`)."""
    engaged = graph.data[graph.metadata.engaged]
    events = _events_in(graph, start, end, stages)
    users = torch.unique(engaged.edge_index[0, events])
    if len(users) > max_users:
        generator = torch.Generator().manual_seed(seed)
        users = users[torch.randperm(len(users), generator=generator)[:max_users]].sort().values
    return EvaluationWindow(users, window_items(graph, users, start, end, stages), start, end)


def window_items(
    graph: RelationalGraph, users: Tensor, start: int, end: int, stages: int = 1
) -> UserItems:
    """For each of `users` (graph node ids), the items of their events of the `stages` deepest
    funnel stages in [start, end); a row per user, empty where they have none."""
    meta, data = graph.metadata, graph.data
    engaged = data[meta.engaged]
    position = torch.full((int(data[meta.user_type].num_nodes),), -1, dtype=torch.long)
    position[users] = torch.arange(len(users))
    pairs = _events_in(graph, start, end, stages) & (position[engaged.edge_index[0]] >= 0)
    return UserItems.from_pairs(
        position[engaged.edge_index[0, pairs]],
        engaged.edge_index[1, pairs],
        len(users),
        int(data[meta.item_type].num_nodes),
    )


def _events_in(graph: RelationalGraph, start: int, end: int, stages: int) -> Tensor:
    """Which engaged edges are events of the `stages` deepest stages in [start, end). Shapes: [E]."""
    engaged = graph.data[graph.metadata.engaged]
    deepest = len(graph.metadata.stages) - stages
    return (
        (engaged.edge_time >= start) & (engaged.edge_time < end) & (engaged.edge_stage >= deepest)
    )
