"""Funnel events narrowed to some users: renumbered to their rows, nothing else kept."""

from __future__ import annotations

import torch

from hier_pipeline.interests.events import FunnelEvents

EVENTS = FunnelEvents(
    users=torch.tensor([4, 1, 4, 2]),
    items=torch.tensor([0, 1, 2, 3]),
    stage=torch.tensor([0, 1, 2, 1]),
    time=torch.tensor([10, 20, 30, 40]),
)


def test_of_users_keeps_their_events_renumbered_to_their_rows() -> None:
    mine = EVENTS.of_users(torch.tensor([4, 9]))
    assert mine.users.tolist() == [0, 0]
    assert mine.items.tolist() == [0, 2] and mine.time.tolist() == [10, 30]


def test_of_no_users_or_no_events_is_empty() -> None:
    assert len(EVENTS.of_users(torch.zeros(0, dtype=torch.long))) == 0
    nothing = FunnelEvents(*(torch.zeros(0, dtype=torch.long) for _ in range(4)))
    assert len(nothing.of_users(torch.tensor([3]))) == 0
