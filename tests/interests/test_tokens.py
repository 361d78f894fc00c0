"""Bag-of-Meaning tokens: they descend the tree, their weights are a distribution per level, the
inverted index scores as the formula says, and the same seed gives the same tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hier_pipeline.interests import (
    HierarchyConfig,
    InvertedIndex,
    TokenConfig,
    assign_tokens,
    build_hierarchy,
)
from hier_pipeline.interests.build import build_interest_hierarchy, build_interest_tokens
from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.tokens import LEVEL_WEIGHT, NO_TOKEN
from tests.interests.conftest import InterestInputs
from tests.interests.planted import planted_vectors


def _tree() -> tuple[torch.Tensor, InterestHierarchy]:
    x, _ = planted_vectors()
    return x, build_hierarchy(x, HierarchyConfig(sizes=(3, 6, 12)))


def test_every_token_has_its_parent_in_the_bag_and_the_path_is_kept() -> None:
    x, tree = _tree()
    others = torch.nn.functional.normalize(torch.randn(40, x.shape[1]), dim=1)
    for vectors in (x, others):
        bags = assign_tokens(vectors, tree, TokenConfig(top_k=2))
        assert bags.tokens.shape == (len(vectors), 3, 2) and bags.missing_levels() == 0
        for row in range(len(vectors)):
            for level in range(3):
                held = [t for t in bags.tokens[row, level].tolist() if t != NO_TOKEN]
                assert int(bags.path[row, level]) in held
                assert all(tree.level_of()[t] == level for t in held)
                if level:
                    above = set(bags.tokens[row, level - 1].tolist())
                    assert all(int(tree.parent[t]) in above for t in held)
        weights = bags.weights
        assert torch.allclose(weights.sum(dim=2), torch.ones(len(vectors), 3))
        assert (weights[:, :, :-1] >= weights[:, :, 1:]).all()  # heaviest first
    assert torch.equal(assign_tokens(x, tree).path, tree.members)  # items: their own clusters


def test_short_levels_are_padded_with_no_token_and_zero_weight() -> None:
    x, tree = _tree()
    bags = assign_tokens(x, tree, TokenConfig(top_k=5))  # level 0 has only 3 primitives
    assert (bags.tokens[:, 0, 3:] == NO_TOKEN).all() and (bags.weights[:, 0, 3:] == 0).all()
    assert (bags.tokens[:, 0, :3] >= 0).all()


def test_the_inverted_index_scores_shared_tokens_finer_levels_first() -> None:
    x, tree = _tree()
    bags = assign_tokens(x, tree, TokenConfig(top_k=2))
    query = 5
    level_of = tree.level_of()
    prior = torch.rand(len(x), 3, generator=torch.Generator().manual_seed(0))

    def held(row: int) -> dict[int, float]:
        tokens, weights = bags.tokens[row].flatten(), bags.weights[row].flatten()
        return {t: w for t, w in zip(tokens.tolist(), weights.tolist(), strict=True) if t >= 0}

    mine = held(query)
    for each in (None, prior):  # the target's prior at a level multiplies that level's term
        index = InvertedIndex(bags, len(tree.parent), each)
        scores = index.scores(bags.tokens[query], bags.weights[query])
        for target in range(len(x)):
            theirs = held(target)
            expected = sum(
                LEVEL_WEIGHT ** int(level_of[t])
                * mine[t]
                * theirs[t]
                * (1.0 if each is None else float(each[target, level_of[t]]))
                for t in mine.keys() & theirs
            )
            assert float(scores[target]) == pytest.approx(expected, rel=1e-5)


def test_tokens_and_vocabulary_are_deterministic_per_seed(
    interest_inputs: InterestInputs, tmp_path: Path
) -> None:
    graph = interest_inputs.graph.load()
    outputs = []
    for run in ("a", "b"):
        hierarchy = build_interest_hierarchy(
            interest_inputs.embeddings, graph, tmp_path / run, HierarchyConfig(seed=3)
        )
        outputs.append(
            build_interest_tokens(
                interest_inputs.embeddings,
                hierarchy,
                interest_inputs.spec,
                interest_inputs.report.database,
                tmp_path / run,
                TokenConfig(),
            )
        )
    first, second = (artifact.load().bags for artifact in outputs)
    assert first.keys() == second.keys() == {"users", "advertisers", "products"}
    for node_type in first:
        assert torch.equal(first[node_type].tokens, second[node_type].tokens)
        assert torch.equal(first[node_type].weights, second[node_type].weights)
    assert outputs[0].vocabulary().equals(outputs[1].vocabulary())
