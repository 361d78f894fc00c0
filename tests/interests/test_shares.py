"""The users' shares per interest level: the formula of `shares.py`, written out event by event."""

from __future__ import annotations

import torch

from hier_pipeline.interests import HierarchyConfig, TokenConfig, build_hierarchy
from hier_pipeline.interests.engaged import event_weights
from hier_pipeline.interests.events import FunnelEvents
from hier_pipeline.interests.shares import level_shares
from tests.interests.planted import planted_vectors

DAY = 86_400


def test_a_users_share_is_their_weighted_events_in_the_items_token() -> None:
    x, _ = planted_vectors()
    tree = build_hierarchy(x, HierarchyConfig(sizes=(3, 6, 12)))
    generator = torch.Generator().manual_seed(0)
    events = FunnelEvents(
        users=torch.randint(0, 4, (60,), generator=generator),  # user 4 has no event
        items=torch.randint(0, len(x), (60,), generator=generator),
        stage=torch.randint(0, 4, (60,), generator=generator),
        time=torch.randint(0, 30 * DAY, (60,), generator=generator),
    )
    as_of, config = 20 * DAY, TokenConfig()
    shares = level_shares(events, 5, tree, config, as_of)
    weight = event_weights(events, as_of, config)
    assert shares.levels == 3
    for level in range(3):
        scores = shares.score(level, torch.arange(5))
        assert scores.shape == (5, len(x))
        for user in range(5):
            mine = (events.users == user) & (events.time < as_of)  # later events do not count
            total = float(weight[mine].sum())
            for item in range(0, len(x), 7):
                token = tree.members[item, level]
                same = mine & (tree.members[events.items, level] == token)
                expected = float(weight[same].sum()) / total if total else 0.0
                assert abs(float(scores[user, item]) - expected) < 1e-5
        # the shares of one user's tokens at a level sum to 1 (or 0 without events)
        assert torch.allclose(shares.shares[level].sum(dim=1)[:4], torch.ones(4))
        assert float(shares.shares[level][4].sum()) == 0.0
