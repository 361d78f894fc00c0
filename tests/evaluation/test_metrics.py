from __future__ import annotations

import math

import pytest
import torch

from hier_pipeline.evaluation.baselines.evaluate import window_metrics
from hier_pipeline.evaluation.baselines.protocol import keep_items
from hier_pipeline.evaluation.baselines.recommender import recommend
from hier_pipeline.ranking.metrics import (
    UserItems,
    evaluate_embeddings,
    ranking_metrics,
    topk_in_chunks,
)


def truth(rows: list[list[int]], num_items: int) -> UserItems:
    users = torch.tensor([u for u, items in enumerate(rows) for _ in items], dtype=torch.long)
    items = torch.tensor([i for row in rows for i in row], dtype=torch.long)
    return UserItems.from_pairs(users, items, len(rows), num_items)


def test_user_items_from_unordered_pairs_with_duplicates() -> None:
    relevant = UserItems.from_pairs(
        torch.tensor([2, 0, 2, 0, 2]), torch.tensor([5, 1, 3, 1, 5]), num_users=4, num_items=6
    )
    assert relevant.rowptr.tolist() == [0, 1, 1, 3, 3]
    assert relevant.items.tolist() == [1, 3, 5]
    assert relevant.contains(torch.tensor([[1, -1], [1, 0], [5, 4], [0, 5]])).tolist() == [
        [True, False],
        [False, False],
        [True, False],
        [False, False],
    ]


def test_hand_computed_values() -> None:
    relevant = truth([[1, 4], [0, 3, 5, 2], [], [5]], num_items=6)
    topk = torch.tensor([[1, 2, 4], [4, 3, 1], [0, 1, 2], [0, 1, 2]])
    # rel: user 0 [1, 0, 1] of |R| = 2; user 1 [0, 1, 0] of |R| = 4; user 2 skipped; user 3 [0, 0, 0].
    got = ranking_metrics(topk, relevant, ks=(1, 3))
    ndcg_0 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))  # 1.5 / 1.63093 = 0.91972
    ndcg_1 = (1 / math.log2(3)) / (1 + 1 / math.log2(3) + 1 / math.log2(4))  # 0.63093 / 2.13093
    expected = {
        "recall@3": (2 / 2 + 1 / 4 + 0) / 3,  # 0.41667
        "hit@3": 2 / 3,
        "map@3": ((1 / 1 + 2 / 3) / 2 + (1 / 2) / 3 + 0) / 3,  # (5/6 + 1/6) / 3 = 1/3
        "ndcg@3": (ndcg_0 + ndcg_1 + 0) / 3,  # 0.40527
        "recall@1": (1 / 2) / 3,
        "hit@1": 1 / 3,
        "map@1": (1 / 1) / 3,  # normalised by min(1, |R|) = 1
        "ndcg@1": 1 / 3,
    }
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-6), name
    assert got["ndcg@3"] == pytest.approx(0.405268, abs=1e-6)


def test_perfect_ranking_scores_one() -> None:
    rows = [[3], [0, 7, 2], [1, 2, 3, 4, 5, 6]]  # the last user has more relevant items than k
    relevant = truth(rows, num_items=8)
    scores = torch.rand(3, 8)
    for u, items in enumerate(rows):
        scores[u, items] += 10.0
    got = ranking_metrics(scores.topk(4).indices, relevant, ks=(4,))
    assert got["ndcg@4"] == pytest.approx(1.0)
    assert got["map@4"] == pytest.approx(1.0)
    assert got["hit@4"] == 1.0
    assert got["recall@4"] == pytest.approx((1 + 1 + 4 / 6) / 3)  # recall is not clipped to k


def test_random_ranking_recalls_about_k_over_the_catalogue() -> None:
    torch.manual_seed(0)
    users, items, k = 500, 2000, 100
    relevant = UserItems.from_pairs(
        torch.arange(users).repeat_interleave(20),
        torch.randint(0, items, (users * 20,)),
        users,
        items,
    )
    got = ranking_metrics(torch.rand(users, items).topk(k).indices, relevant, ks=(k,))
    assert got["recall@100"] == pytest.approx(k / items, abs=0.01)


def test_chunked_topk_equals_dense_topk_with_and_without_exclusions() -> None:
    torch.manual_seed(0)
    user, item = torch.randn(50, 8), torch.randn(30, 8)
    dense = user @ item.T
    assert torch.equal(topk_in_chunks(user, item, 5, chunk=7), dense.topk(5).indices)
    exclude = UserItems.from_pairs(
        torch.randint(0, 50, (200,)), torch.randint(0, 30, (200,)), num_users=50, num_items=30
    )
    masked = dense.clone()
    for u in range(50):
        masked[u, exclude.items[exclude.rowptr[u] : exclude.rowptr[u + 1]]] = -torch.inf
    chunked = topk_in_chunks(user, item, 5, exclude=exclude, chunk=7)
    assert torch.equal(chunked, masked.topk(5).indices)
    assert not exclude.contains(chunked).any()


def test_excluding_nearly_everything_leaves_minus_one() -> None:
    user, item = torch.randn(1, 4), torch.randn(3, 4)
    exclude = UserItems.from_pairs(torch.tensor([0, 0]), torch.tensor([0, 2]), 1, 3)
    assert topk_in_chunks(user, item, 3, exclude=exclude).tolist() == [[1, -1, -1]]


def test_evaluate_embeddings_ranks_a_planted_item_first() -> None:
    item = torch.eye(6)
    user = torch.eye(6)[[2, 5]] + 0.01 * torch.rand(2, 6)
    relevant = truth([[2], [5]], num_items=6)
    got = evaluate_embeddings(user, item, relevant, ks=(1, 3), chunk=1)
    assert got["recall@1"] == got["ndcg@3"] == got["map@3"] == 1.0


def test_k_larger_than_the_candidate_set_counts_the_padding_as_misses() -> None:
    # One candidate left for user 0 (the rest excluded), none for user 1: -1 pads the lists.
    relevant = truth([[0, 2], [1]], num_items=3)
    got = ranking_metrics(torch.tensor([[2, -1, -1], [-1, -1, -1]]), relevant, ks=(3,))
    assert got["recall@3"] == pytest.approx((1 / 2 + 0) / 2)
    assert got["map@3"] == pytest.approx((1 / 2 + 0) / 2)  # (precision@1 = 1) / min(3, |R| = 2)
    assert got["ndcg@3"] == pytest.approx((1 / (1 + 1 / math.log2(3)) + 0) / 2)
    assert got["hit@3"] == pytest.approx(1 / 2)


def test_no_user_with_positives_gives_nan_not_zero() -> None:
    got = ranking_metrics(torch.tensor([[0, 1], [1, 2]]), truth([[], []], 3), ks=(2,))
    assert got.keys() == {"recall@2", "ndcg@2", "map@2", "hit@2"}
    assert all(math.isnan(value) for value in got.values())


def test_tied_scores_rank_by_popularity_and_short_catalogues_pad_with_misses() -> None:
    # Every score equal: the list is the popularity order [1, 2, 0] for both users; k = 50 > 3
    # items pads with -1. User 0 already bought item 0, so it is no candidate for them.
    class Constant:
        def fit(self, history: object) -> None: ...

        def score(self, users: torch.Tensor) -> torch.Tensor:
            return torch.zeros(len(users), 3)

    exclude = truth([[0], []], num_items=3)
    topk = recommend(Constant(), torch.tensor([7, 9]), 50, torch.tensor([1.0, 5.0, 3.0]), exclude)
    assert topk[:, :4].tolist() == [[1, 2, -1, -1], [1, 2, 0, -1]]
    assert (topk[:, 4:] == -1).all() and topk.shape == (2, 50)
    relevant = truth([[0, 2], [0]], num_items=3)
    cold = keep_items(relevant, torch.tensor([True, False, False]))  # item 0 is new
    got = window_metrics(topk, relevant, cold, ks=(10,))
    # user 0: item 2 at rank 2 of |R| = 2, item 0 excluded; user 1: item 0 at rank 3 of |R| = 1.
    assert got == pytest.approx(
        {
            "recall@10": (1 / 2 + 1) / 2,
            "map@10": ((1 / 2) / 2 + (1 / 3) / 1) / 2,
            "ndcg@10": ((1 / math.log2(3)) / (1 + 1 / math.log2(3)) + 1 / math.log2(4)) / 2,
            "cold_item_recall@50": (0 + 1) / 2,  # item 0 is relevant and cold for both
        }
    )
