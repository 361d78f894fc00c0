"""Advertisers' Bags of Meaning come from the events on their products: the interests their
catalogue serves as people engage with it, not one point of their embedding; without events,
from what their catalogue is."""

from __future__ import annotations

from pathlib import Path

import torch

from hier_pipeline.interests import HierarchyConfig, TokenConfig, assign_tokens, build_hierarchy
from hier_pipeline.interests.build import build_interest_hierarchy, build_interest_tokens
from hier_pipeline.interests.engaged import owner_tokens
from hier_pipeline.interests.events import (
    FunnelEvents,
    funnel_events,
    item_owners,
    owned_events,
)
from hier_pipeline.interests.tokens import NO_TOKEN
from tests.interests.conftest import InterestInputs
from tests.interests.planted import planted_vectors


def test_an_advertisers_bag_names_what_its_products_are_engaged_for(
    interest_inputs: InterestInputs, tmp_path: Path
) -> None:
    graph = interest_inputs.graph.load()
    hierarchy = build_interest_hierarchy(
        interest_inputs.embeddings, graph, tmp_path, HierarchyConfig(seed=3)
    )
    tokens = build_interest_tokens(
        interest_inputs.embeddings,
        hierarchy,
        interest_inputs.spec,
        interest_inputs.report.database,
        tmp_path,
        TokenConfig(),
        graph=graph,
    ).load()
    owner = item_owners(graph, "advertisers")
    assert owner is not None and (owner >= 0).all()  # every synthetic product has an advertiser
    events = owned_events(funnel_events(graph), owner)
    assert torch.equal(events.users, owner[events.items])
    tree, bags = hierarchy.load(), tokens.bags["advertisers"]
    by_embedding = assign_tokens(interest_inputs.embeddings.load()["advertisers"], tree)
    engaged = torch.bincount(events.users, minlength=len(by_embedding.path)) > 0
    assert engaged.any()
    for advertiser in torch.nonzero(engaged).flatten().tolist():
        # every interest in its bag is one its products were engaged in, at every level
        mine = events.items[events.users == advertiser]
        for level in range(tree.levels):
            named = set(bags.tokens[advertiser, level].tolist()) - {NO_TOKEN}
            assert named and named <= set(tree.members[mine, level].tolist())
    assert engaged.all()  # the test world's: each advertiser has engaged products


def test_an_advertiser_is_placed_by_its_events_else_its_catalogue_else_its_embedding() -> None:
    items, _ = planted_vectors()
    tree = build_hierarchy(items, HierarchyConfig(sizes=(3, 6, 12)))
    vectors = items[[0, 30, 60]]  # three advertisers placed where three items are
    owner = torch.full((len(tree.members),), -1)
    owner[:6] = 1  # advertiser 1 sells items 0-5, advertiser 2 items 40-47, advertiser 0 nothing
    owner[40:48] = 2
    bought = FunnelEvents(*(torch.tensor([v]) for v in (0, 44, 3, 5)))  # user 0 bought item 44
    bags = owner_tokens(vectors, bought, owner, tree.members, tree, TokenConfig(), 10)
    by_embedding = assign_tokens(vectors, tree)
    assert torch.equal(bags.tokens[0], by_embedding.tokens[0])  # no products, no events
    for level in range(tree.levels):  # advertiser 1: no events, each of its products alike
        codes = tree.members[:6, level]
        share = torch.bincount(codes, minlength=len(tree.parent)).float() / len(codes)
        named = bags.tokens[1, level]
        kept = named != NO_TOKEN
        assert set(named[kept].tolist()) == set(codes.tolist())
        torch.testing.assert_close(bags.weights[1, level][kept], share[named[kept]])
        # advertiser 2: the one product engaged with, not its whole catalogue
        assert bags.tokens[2, level, 0] == tree.members[44, level]
        assert bags.weights[2, level, 0] == 1.0
