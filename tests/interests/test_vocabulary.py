"""The vocabulary: labels are the categories most of a primitive's items share and the words that
set its items apart, examples are its most central items, parents are checked, usage is
summarised per level."""

from __future__ import annotations

import pandas as pd
import torch

from hier_pipeline.interests import (
    HierarchyConfig,
    assign_tokens,
    build_hierarchy,
    find_interest_folder,
)
from hier_pipeline.interests.labels import common_values, distinctive_words, nearest_members
from hier_pipeline.interests.vocabulary import orphan_tokens, usage_stats, vocabulary_table
from tests.interests.conftest import Materialised
from tests.interests.planted import planted_vectors

COLOURS = ["red", "blue", "green"]


def test_a_primitive_is_named_by_the_category_most_of_its_items_share() -> None:
    x, _ = planted_vectors(branching=(2, 2), per_leaf=5)
    tree = build_hierarchy(x, HierarchyConfig(sizes=(2, 4)))
    department = [f"d{int(t)}" for t in tree.members[:, 0]]
    department[0] = "other"  # one stray item does not change the majority
    mixed = [str(i % 4) for i in range(len(x))]  # no value holds half of any primitive
    named = common_values({"department": department, "colour": mixed}, tree)
    for token in range(tree.offsets[1]):
        assert named[token] == [f"department: d{token}"]
    for token in range(tree.offsets[1], len(tree.parent)):
        parent = int(tree.parent[token])
        assert named[token] == [f"department: d{parent}"]


def test_labels_name_what_sets_a_primitive_apart() -> None:
    x, truth = planted_vectors(branching=(3,), per_leaf=6)
    tree = build_hierarchy(x, HierarchyConfig(sizes=(3,)))
    # Every item is a "shoe"; its colour is its planted cluster; "shiny" is rare everywhere.
    texts = [
        f"{COLOURS[int(c)]} shoe" + (" shiny" if i == 0 else "") for i, c in enumerate(truth[:, 0])
    ]
    words = distinctive_words(texts, tree, top=1)
    colour_of = {int(tree.members[i, 0]): COLOURS[int(truth[i, 0])] for i in range(len(x))}
    assert words == [[colour_of[t]] for t in range(3)]
    assert distinctive_words([""] * len(x), tree) == [[], [], []]


def test_examples_are_members_closest_to_the_centroid() -> None:
    x, _ = planted_vectors(branching=(2, 2), per_leaf=5)
    tree = build_hierarchy(x, HierarchyConfig(sizes=(2, 4)))
    examples = nearest_members(x, tree, count=3)
    assert len(examples) == len(tree.parent)
    for t, items in enumerate(examples):
        level = int(tree.level_of()[t])
        members = (tree.members[:, level] == t).nonzero().flatten()
        assert set(items) <= set(members.tolist()) and len(items) == min(3, len(members))
        similarity = x[members] @ tree.centroids[t]
        assert items[0] == int(members[similarity.argmax()])


def test_vocabulary_rows_and_usage(materialised: Materialised) -> None:
    vocabulary = pd.read_parquet(find_interest_folder(materialised.home) / "vocabulary.parquet")
    assert list(vocabulary.columns) == [
        "token",
        "level",
        "parent",
        "items",
        "users_bags",
        "advertisers_bags",
        "products_bags",
        "label",
        "examples",
    ]
    assert vocabulary.groupby("level")["items"].sum().tolist() == [150, 150, 150]
    assert vocabulary["label"].str.len().gt(0).all()  # every primitive's items have text
    assert not orphan_tokens(vocabulary)
    broken = vocabulary.copy()
    broken.loc[len(broken) - 1, "parent"] = "L0:99"
    assert orphan_tokens(broken) == [broken["token"].iloc[-1]]


def test_usage_counts_coverage_and_entropy() -> None:
    x, _ = planted_vectors(branching=(2, 2), per_leaf=5)
    tree = build_hierarchy(x, HierarchyConfig(sizes=(2, 4)))
    bags = {"items": assign_tokens(x, tree)}
    stats = usage_stats(tree, bags)
    assert [s["tokens"] for s in stats] == [2, 4]
    assert all(s["coverage"] == 1.0 and s["entities_with_token"] == 1.0 for s in stats)
    assert stats[0]["entropy"] == 1.0  # two equal clusters of 10
    table = vocabulary_table(tree, bags, [["w"]] * 6, [["1"]] * 6)
    assert table["items"].tolist() == tree.sizes().tolist()
    assert torch.equal(torch.tensor(table["parent"].eq("").tolist()), tree.parent < 0)
