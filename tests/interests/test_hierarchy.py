"""Spherical k-means and the interest tree on tiny planted tensors: invariants, sizes, ids,
determinism, and exact recovery of a well separated tree."""

from __future__ import annotations

import pytest
import torch

from hier_pipeline.interests import (
    HierarchyConfig,
    build_hierarchy,
    level_sizes,
    spherical_kmeans,
)
from hier_pipeline.interests.hierarchy import token_ids
from hier_pipeline.interests.quality import chance_agreement, level_agreement
from tests.interests.planted import planted_vectors


def test_kmeans_assigns_every_point_to_its_nearest_nonempty_centroid() -> None:
    x, _ = planted_vectors()
    clusters = spherical_kmeans(x, 7, torch.Generator().manual_seed(0))
    assert torch.equal(clusters.labels, (x @ clusters.centroids.T).argmax(dim=1))
    assert torch.bincount(clusters.labels).min() > 0
    assert torch.allclose(clusters.centroids.norm(dim=1), torch.ones(len(clusters.centroids)))
    again = spherical_kmeans(x, 7, torch.Generator().manual_seed(0))
    assert torch.equal(clusters.centroids, again.centroids)


def test_kmeans_never_returns_more_clusters_than_distinct_points() -> None:
    x = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), dim=1)
    clusters = spherical_kmeans(x, 5, torch.Generator().manual_seed(0))
    assert len(clusters.centroids) == 2
    assert clusters.labels.tolist() in ([0, 0, 1], [1, 1, 0])


def test_tree_invariants_hold_and_levels_have_the_asked_sizes() -> None:
    x, _ = planted_vectors()
    tree = build_hierarchy(x, HierarchyConfig(sizes=(3, 6, 12)))
    assert tree.primitives_per_level() == (3, 6, 12)
    assert not any(tree.violations().values()), tree.violations()
    level_of = tree.level_of()
    assert (tree.parent[level_of == 0] == -1).all()
    children = level_of > 0
    assert torch.equal(level_of[tree.parent[children]], level_of[children] - 1)
    # Every item's path is nested, and it is exactly the greedy descent of its own vector.
    assert torch.equal(tree.parent[tree.members[:, 1:]], tree.members[:, :-1])
    assert torch.equal(tree.path(x), tree.members)


def test_a_well_separated_planted_tree_is_recovered_exactly() -> None:
    x, truth = planted_vectors(branching=(3, 2, 2))
    tree = build_hierarchy(x, HierarchyConfig(sizes=(3, 6, 12)))
    for level in range(3):
        agreement = level_agreement(tree.members[:, level], truth[:, level])
        assert agreement == {
            "nmi": pytest.approx(1.0),
            "ami": pytest.approx(1.0),
            "ari": pytest.approx(1.0),
        }, level
        assert chance_agreement(tree.members[:, level], truth[:, level])["ari"] < 0.2


def test_the_same_seed_grows_the_same_tree_and_ids() -> None:
    x, _ = planted_vectors(seed=3)
    config = HierarchyConfig(sizes=(2, 5, 9), seed=7)
    first, second = build_hierarchy(x, config), build_hierarchy(x, config)
    assert first.token_ids == second.token_ids
    assert torch.equal(first.centroids, second.centroids)
    assert torch.equal(first.members, second.members)


def test_children_are_ordered_largest_first() -> None:
    x, _ = planted_vectors(branching=(2, 3), per_leaf=5)
    tree = build_hierarchy(x, HierarchyConfig(sizes=(2, 6)))
    sizes = tree.sizes()
    for parent in range(tree.offsets[1]):
        siblings = sizes[(tree.parent == parent).nonzero().flatten()]
        assert torch.equal(siblings, siblings.sort(descending=True).values)


def test_default_sizes_follow_the_number_of_items() -> None:
    # finest: one primitive per 24 items; coarsest: its square root; geometric in between.
    assert level_sizes(3000, HierarchyConfig()) == (11, 37, 125)
    assert level_sizes(92_331, HierarchyConfig()) == (62, 488, 3847)
    assert level_sizes(150, HierarchyConfig()) == (2, 3, 6)
    assert level_sizes(10, HierarchyConfig()) == (1, 1, 1)
    assert level_sizes(3000, HierarchyConfig(levels=2, items_per_leaf=30)) == (10, 100)
    with pytest.raises(ValueError, match="non-decreasing"):
        level_sizes(100, HierarchyConfig(sizes=(8, 4)))


def test_token_ids_encode_the_path_zero_padded_per_level() -> None:
    parent = torch.tensor([-1] * 12 + [7, 7, 7, 0] + [12] * 11 + [13])
    offsets = (0, 12, 16, 28)
    ids = token_ids(parent, offsets)
    assert ids[:2] == ["L0:00", "L0:01"] and ids[11] == "L0:11"
    assert ids[12:16] == ["L1:07.0", "L1:07.1", "L1:07.2", "L1:00.0"]
    assert ids[16] == "L2:07.0.00" and ids[26] == "L2:07.0.10" and ids[27] == "L2:07.1.00"
