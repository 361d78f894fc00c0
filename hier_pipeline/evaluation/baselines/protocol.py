"""What is scored, decided from the data: which users (warm ones), which relevant items (all, or
cold ones only), and whether items a user already bought are candidates."""

from __future__ import annotations

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions, csr_entries
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.ranking.metrics import UserItems
from hier_pipeline.ranking.window import EvaluationWindow, target_window

REPEAT_THRESHOLD = 0.05


def repeat_rate(graph: RelationalGraph, start: int, end: int) -> float:
    """The share of target-stage events in [start, end) whose (user, item) pair already had a
    target-stage event before `start`: near 0 where items are consumed once (a film is rated once),
    high where users repeat (grocery). NaN without events in the window."""
    meta, engaged = graph.metadata, graph.data[graph.metadata.engaged]
    num_items = int(graph.data[meta.item_type].num_nodes)
    target = engaged.edge_stage == len(meta.stages) - 1
    key = engaged.edge_index[0] * num_items + engaged.edge_index[1]
    earlier = torch.unique(key[target & (engaged.edge_time < start)])
    current = key[target & (engaged.edge_time >= start) & (engaged.edge_time < end)]
    if len(current) == 0:
        return float("nan")
    return torch.isin(current, earlier).float().mean().item()


def warm_window(
    graph: RelationalGraph,
    history: Interactions,
    start: int,
    end: int,
    max_users: int,
    seed: int = 0,
) -> EvaluationWindow:
    """`target_window` restricted to warm users (at least one interaction in `history`), then a
    fixed random subset of at most `max_users` of them."""
    return users_by_history(graph, history, start, end, max_users, seed, warm=True)


def users_by_history(
    graph: RelationalGraph,
    history: Interactions,
    start: int,
    end: int,
    max_users: int,
    seed: int,
    warm: bool,
) -> EvaluationWindow:
    """`target_window` restricted to the warm users (`warm`: at least one interaction in
    `history`) or to the cold ones (none: nothing to learn their taste from but their own rows),
    then a fixed random subset of at most `max_users` of them."""
    window = target_window(graph, start, end, max_users=history.num_users)
    rows = (history.active_users()[window.users] == warm).nonzero().flatten()
    if len(rows) > max_users:
        generator = torch.Generator().manual_seed(seed)
        rows = rows[torch.randperm(len(rows), generator=generator)[:max_users]].sort().values
    return EvaluationWindow(window.users[rows], select_rows(window.relevant, rows), start, end)


def select_rows(items: UserItems, rows: Tensor) -> UserItems:
    """The given rows, in that order. Shapes: rows [R] -> R rows."""
    _, entry = csr_entries(items.rowptr, rows)
    rowptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(items.counts()[rows], 0)])
    return UserItems(rowptr, items.items[entry], items.num_items)


def keep_items(items: UserItems, keep: Tensor) -> UserItems:
    """Each row's items where `keep[item]` holds (e.g. cold items only). Shapes: keep [I] bool."""
    row, item = items.rows(0, items.num_users)
    mask = keep[item]
    return UserItems.from_pairs(row[mask], item[mask], items.num_users, items.num_items)
