"""The interest super-graph on the tiny world's real funnel events: PMI-weighted co-engagement
edges as the formula says, the tree's edges, and a density far above the raw graph's."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from hier_pipeline.interests import HierarchyConfig, build_hierarchy
from hier_pipeline.interests.events import funnel_events
from hier_pipeline.interests.supergraph import build_supergraph, supergraph_stats
from tests.interests.conftest import InterestInputs


def test_edges_are_the_positive_pmi_pairs_of_stage_weighted_events(
    interest_inputs: InterestInputs,
) -> None:
    graph = interest_inputs.graph.load()
    vectors = interest_inputs.embeddings.load()
    tree = build_hierarchy(vectors["products"], HierarchyConfig(sizes=(3, 6, 12)))
    users = tree.path(vectors["users"])
    supergraph = build_supergraph(graph, users, tree.members, tree)

    # The same PMI from pandas, at the finest level.
    events = funnel_events(graph)
    user, item, stage = events.users, events.items, events.stage
    events = pd.DataFrame(
        {"a": users[user, 2].numpy(), "b": tree.members[item, 2].numpy(), "w": 2.0 ** stage.numpy()}
    )
    pairs = events.groupby(["a", "b"]).w.sum()
    total = pairs.sum()
    out, into = pairs.groupby(level=0).sum(), pairs.groupby(level=1).sum()
    expected = {
        (a, b): math.log(w * total / (out[a] * into[b]))
        for (a, b), w in pairs.items()
        if w * total > out[a] * into[b]
    }
    fine = tree.level_of()[supergraph.edge_index[0]] == 2
    found = {
        (int(a), int(b)): float(p)
        for a, b, p in zip(*supergraph.edge_index[:, fine], supergraph.pmi[fine], strict=True)
    }
    assert found.keys() == expected.keys()
    assert all(found[k] == pytest.approx(expected[k], rel=1e-5) for k in expected)
    assert (supergraph.pmi > 0).all()
    same_level = tree.level_of()[supergraph.edge_index]
    assert torch.equal(same_level[0], same_level[1])
    assert supergraph.tree.shape == (2, 6 + 12)
    assert torch.equal(tree.parent[supergraph.tree[1]], supergraph.tree[0])


def test_every_interest_is_coherent_and_connected(interest_inputs: InterestInputs) -> None:
    """Each interest keeps at least as many edges as it has nodes (PMI > 0 pairs), and most are
    self-loops: its users engage its items more than chance.

    Not asserted: density above the raw graph's. The tiny world's raw user-item graph is dense
    (about 0.37), and a perfectly coherent level of n interests keeps only its n self-loops,
    density 1/n; the ratio is reported per level (`supergraph_stats`, bench_interests.py), and
    on a sparse real catalogue it is far above 1 at the coarse levels."""
    graph = interest_inputs.graph.load()
    vectors = interest_inputs.embeddings.load()
    tree = build_hierarchy(vectors["products"], HierarchyConfig(sizes=(3, 6, 12)))
    supergraph = build_supergraph(graph, tree.path(vectors["users"]), tree.members, tree)
    stats = supergraph_stats(supergraph, tree, graph)
    assert [s["nodes"] for s in stats] == [3, 6, 12]
    assert stats[0]["raw_nodes"] == 250  # 100 users + 150 products
    for level in stats:
        assert 0 < level["density"] <= 1
        assert level["edges"] >= level["nodes"], stats
    assert stats[0]["self_loop_share"] >= 2 / 3, stats
