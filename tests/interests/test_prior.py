"""P(item | token) for token retrieval: the engagement mass written out event by event (every
funnel stage the same total, recent events heavier, nothing after `as_of`), shares that are a
distribution over each token's items in which an item without events keeps a place, and the
retrieval that orders a token's items by them where the ranker's plain overlap ties them."""

from __future__ import annotations

import torch

from hier_pipeline.evaluation.interest_recommender import TokenRecommender
from hier_pipeline.interests import HierarchyConfig, TokenConfig, build_hierarchy
from hier_pipeline.interests.events import FunnelEvents
from hier_pipeline.interests.prior import engagement_mass, token_shares
from tests.interests.planted import planted_vectors

DAY = 86_400


def test_every_stage_carries_the_same_mass_and_recent_events_weigh_more() -> None:
    generator = torch.Generator().manual_seed(0)
    events = FunnelEvents(
        users=torch.randint(0, 5, (80,), generator=generator),
        items=torch.randint(0, 9, (80,), generator=generator),  # item 9 has no event
        stage=torch.randint(0, 3, (80,), generator=generator),
        time=torch.randint(0, 40 * DAY, (80,), generator=generator),
    )
    as_of, half_life = 30 * DAY, 14.0
    mass = engagement_mass(events, 10, as_of, half_life)
    kept = events.time < as_of
    per_stage = {s: int((kept & (events.stage == s)).sum()) for s in range(3)}
    expected = torch.zeros(10, dtype=torch.float64)
    for item, stage, time in zip(
        events.items[kept].tolist(),
        events.stage[kept].tolist(),
        events.time[kept].tolist(),
        strict=True,
    ):
        expected[item] += 2 ** (-(as_of - time) / (half_life * DAY)) / per_stage[stage]
    assert torch.allclose(mass, expected) and mass[9] == 0
    # one purchase against four views of the same day: the same mass
    same_day = FunnelEvents(
        torch.zeros(5, dtype=torch.long),
        torch.tensor([0, 0, 0, 0, 1]),
        torch.tensor([0, 0, 0, 0, 1]),
        torch.full((5,), 10 * DAY),
    )
    balanced = engagement_mass(same_day, 2, 11 * DAY, half_life)
    assert torch.allclose(balanced[0], balanced[1])


def test_shares_are_a_distribution_over_each_tokens_items() -> None:
    generator = torch.Generator().manual_seed(1)
    codes = torch.stack(
        [
            torch.randint(0, 3, (50,), generator=generator),
            torch.randint(3, 10, (50,), generator=generator),
        ],
        dim=1,
    )
    mass = torch.rand(50, generator=generator, dtype=torch.float64)
    mass[::5] = 0  # items without events
    shares = token_shares(codes, mass)
    for level in range(2):
        totals = torch.zeros(10).index_add_(0, codes[:, level], shares[:, level])
        assert torch.allclose(totals[torch.unique(codes[:, level])], torch.ones(1))
    assert (shares[::5] > 0).all()  # a new item keeps a share of its token
    same = codes[:, 1] == codes[0, 1]
    order = torch.argsort(mass[same]).tolist()
    assert shares[same, 1][order].diff().ge(0).all()  # more engagement, a larger share
    uniform = token_shares(codes, torch.zeros(50, dtype=torch.float64))  # no events at all
    sizes = torch.bincount(codes[:, 1], minlength=10).float()
    assert torch.allclose(uniform[:, 1], 1 / sizes[codes[:, 1]])


def test_token_retrieval_orders_a_tokens_items_by_engagement_and_the_plain_overlap_ties_them() -> (
    None
):
    x, _ = planted_vectors()
    tree = build_hierarchy(x, HierarchyConfig(sizes=(3, 6, 12)))
    generator = torch.Generator().manual_seed(2)
    events = FunnelEvents(
        users=torch.randint(0, 6, (120,), generator=generator),
        items=torch.randint(0, len(x), (120,), generator=generator),
        stage=torch.randint(0, 3, (120,), generator=generator),
        time=torch.randint(0, 30 * DAY, (120,), generator=generator),
    )
    users, as_of, config = torch.arange(6), 25 * DAY, TokenConfig()
    vectors = x[: len(users)]
    shared = TokenRecommender(users, vectors, tree, config, events, as_of).score(users)
    plain = TokenRecommender(users, vectors, tree, config, events, as_of, item_shares=False)
    overlap = plain.score(users)
    mass = engagement_mass(events, len(x), as_of, config.half_life_days)
    smoothed = mass + mass.mean()
    finest = tree.members[:, -1]
    siblings = [(a, b) for a in range(len(x)) for b in range(a) if finest[a] == finest[b]]
    assert siblings
    for a, b in siblings:  # the same token at every level: the same overlap
        assert torch.equal(overlap[:, a], overlap[:, b])
        reached = overlap[:, a] > 0
        ratio = shared[reached, a] / shared[reached, b]
        assert torch.allclose(ratio, torch.full_like(ratio, float(smoothed[a] / smoothed[b])))
