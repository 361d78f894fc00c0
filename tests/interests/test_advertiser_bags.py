"""Advertisers' Bags of Meaning come from the events on their products: the interests their
catalogue serves as people engage with it, not one point of their embedding."""

from __future__ import annotations

from pathlib import Path

import torch

from hier_pipeline.interests import HierarchyConfig, TokenConfig, assign_tokens
from hier_pipeline.interests.build import build_interest_hierarchy, build_interest_tokens
from hier_pipeline.interests.events import funnel_events, item_owners, owned_events
from hier_pipeline.interests.tokens import NO_TOKEN
from tests.interests.conftest import InterestInputs


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
    # an advertiser without events on its products keeps the embedding's bag
    assert torch.equal(bags.tokens[~engaged], by_embedding.tokens[~engaged])
