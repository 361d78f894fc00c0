"""TIFU-KNN on hand-made baskets whose user vectors are known, and on the tiny synthetic world."""

from __future__ import annotations

import math

import pytest
import torch

from hier_pipeline.evaluation.baselines import TIFUKNN, evaluate_baselines, recommend
from tests.evaluation.histories import events


def test_alpha_one_scores_the_users_own_decayed_basket_vector() -> None:
    # user 0's baskets, oldest first: day 20 {0, 1}, day 10 {0}, day 0 {0 bought and seen, 2 seen}
    history = events(
        [
            (0, 0, 20.5, 1),
            (0, 1, 20.4, 1),
            (0, 0, 10.5, 1),
            (0, 0, 0.5, 1),
            (0, 0, 0.4, 0),  # same day, same item: the basket keeps the larger weight, 1.0
            (0, 2, 0.2, 0),
            (1, 3, 5.5, 1),
        ],
        num_users=3,
        num_items=4,
    )
    model = TIFUKNN(neighbours=5, alpha=1.0, group_size=2, basket_decay=0.5, group_decay=0.25)
    model.fit(history)
    # m = 2 from the most recent: groups {day 10, day 0} and {day 20}; v = mean_g r_g^j g_j
    day0, day10, day20 = 1 / 2 * 1 / 2, 0.5 / 2 * 1 / 2, 1 / 1 * 0.25 / 2
    expected = [
        [day0 + day10 + day20, day20, 0.5 * day0, 0.0],
        [0.0, 0.0, 0.0, 1.0],
        [0.0, 0.0, 0.0, 0.0],  # no history: every item ties, popularity decides
    ]
    scores = model.score(torch.tensor([0, 1, 2]))
    assert scores.tolist() == [pytest.approx(row, rel=1e-6) for row in expected]


def test_target_only_baskets_ignore_shallow_stages() -> None:
    history = events([(0, 0, 3.5, 1), (0, 1, 3.4, 0), (0, 2, 1.5, 0)], 1, 3)
    model = TIFUKNN(alpha=1.0, target_only=True)
    model.fit(history)
    assert model.score(torch.tensor([0])).tolist() == [[1.0, 0.0, 0.0]]  # one basket, one group


def test_neighbours_lend_their_items_and_repeats_rank_first() -> None:
    # user 0 buys item 0 on three days; user 1 shares item 0 and adds item 1; user 2 shares nothing
    rows = [(0, 0, day + 0.5, 1) for day in (1, 8, 15)]
    rows += [(1, 0, 2.5, 1), (1, 1, 2.4, 1), (2, 2, 1.5, 1)]
    history = events(rows, 3, 4)
    model = TIFUKNN(neighbours=1, alpha=0.5)
    model.fit(history)
    scores = model.score(torch.tensor([0, 1, 2]))
    own = TIFUKNN(alpha=1.0)
    own.fit(history)
    vectors = own.score(torch.arange(3))
    assert torch.allclose(scores[0], 0.5 * vectors[0] + 0.5 * vectors[1])
    assert torch.allclose(scores[2], 0.5 * vectors[2])  # no user shares an item: no neighbour
    ranked = recommend(model, torch.tensor([0]), 3, history.popularity())
    assert ranked.tolist() == [[0, 1, 2]]  # the repeated item, the neighbour's, then popularity


def test_tifuknn_on_the_tiny_world(synthetic_pipeline) -> None:
    graph, content, split = synthetic_pipeline
    result = evaluate_baselines(graph, content, split, names=["tifuknn"])
    assert result.num_users > 0
    for metric, value in result.metrics["tifuknn"].items():
        assert (metric.startswith("cold") and math.isnan(value)) or 0.0 <= value <= 1.0, metric
    assert result.metrics["tifuknn"]["recall@100"] > 0.0
