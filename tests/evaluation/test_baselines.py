"""Each baseline on tiny hand-made interaction sets whose right answer is known."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.models import LightGCN

from hier_pipeline.evaluation.baselines import (
    EASE,
    UNSCORED,
    ContentKNN,
    FitBudget,
    Interactions,
    ItemKNN,
    LightGCNRecommender,
    Popularity,
    Repeat,
    recommend,
)
from hier_pipeline.evaluation.baselines.interactions import DAY, unique_pairs
from hier_pipeline.evaluation.baselines.lightgcn import propagate, symmetric_adjacency
from hier_pipeline.evaluation.baselines.profiles import (
    NEGATIVE_WEIGHTS,
    STAGE_RATIOS,
    Profile,
    profiled_grid,
)
from hier_pipeline.evaluation.baselines.recommender import Memo
from hier_pipeline.ranking.metrics import UserItems
from tests.evaluation.histories import BEFORE, events


class Fixed:
    """A recommender whose scores are given: to test the ranking alone."""

    def __init__(self, scores: torch.Tensor) -> None:
        self.scores = scores

    def fit(self, history: Interactions) -> None:
        pass

    def score(self, users: torch.Tensor) -> torch.Tensor:
        return self.scores[users]


def test_recommend_orders_ties_by_popularity_then_id_and_excludes() -> None:
    scores = torch.tensor([[1.0, 3.0, 1.0, 1.0, -2.0], [-0.5, -0.25, UNSCORED, -0.5, UNSCORED]])
    popularity = torch.tensor([0.0, 0.0, 5.0, 0.0, 9.0])
    ranked = recommend(Fixed(scores), torch.tensor([0, 1]), 5, popularity, chunk=1)
    assert ranked.tolist() == [[1, 2, 0, 3, 4], [1, 0, 3, 4, 2]]
    exclude = UserItems.from_pairs(torch.tensor([0, 0, 0]), torch.tensor([1, 2, 4]), 2, 5)
    ranked = recommend(Fixed(scores), torch.tensor([0, 1]), 4, popularity, exclude)
    assert ranked.tolist() == [[0, 3, -1, -1], [1, 0, 3, 4]]
    assert recommend(Fixed(scores), torch.tensor([1]), 7, popularity).tolist() == [
        [1, 0, 3, 4, 2, -1, -1]  # k larger than the catalogue
    ]


@pytest.mark.parametrize("k", [3, 8])  # 3: ties settled among the tie order's first 12 items
@pytest.mark.parametrize("seed", range(5))
def test_recommend_equals_a_full_sort_by_score_then_popularity_then_id(seed: int, k: int) -> None:
    """Random scores with many ties (few distinct values, UNSCORED runs) and excluded items,
    against Python's sort of every (score, popularity, -id) triple."""
    generator = torch.Generator().manual_seed(seed)
    users, items = 40, 30
    scores = torch.randint(0, 4, (users, items), generator=generator).float() / 4
    scores[torch.rand(users, items, generator=generator) < 0.3] = UNSCORED
    popularity = torch.randint(0, 3, (items,), generator=generator).float()
    pairs = (torch.rand(users, items, generator=generator) < 0.2).nonzero()
    pairs[: items - 3, 0] = 0  # user 0 keeps only 3 candidates: a tail of -1
    pairs[: items - 3, 1] = torch.arange(items - 3)
    pairs = pairs.unique(dim=0)
    exclude = UserItems.from_pairs(pairs[:, 0], pairs[:, 1], users, items)
    ranked = recommend(Fixed(scores), torch.arange(users), k, popularity, exclude, chunk=7)
    excluded = set(map(tuple, pairs.tolist()))
    for user in range(users):
        candidates = [i for i in range(items) if (user, i) not in excluded]
        candidates.sort(key=lambda i: (-scores[user, i].item(), -popularity[i].item(), i))
        expected = (candidates + [-1] * k)[:k]
        assert ranked[user].tolist() == expected, user


def test_pair_weights_decay_by_half_life() -> None:
    history = events([(0, 1, 10.0, 1), (0, 1, 0.0, 0), (1, 0, 20.0, 1)], 2, 2)
    pairs = history.pair_weights(half_life_days=10.0)
    assert pairs.dense(torch.tensor([0, 1])).tolist() == [[0.0, 0.5 + 0.5], [0.25, 0.0]]
    assert history.popularity().tolist() == [1.0, 1.5]


@pytest.mark.parametrize("low", [0, -50])
def test_unique_pairs_equals_torch_unique_over_columns(low: int) -> None:
    generator = torch.Generator().manual_seed(0)
    first = torch.randint(-3, 40, (5000,), generator=generator)
    second = torch.randint(low, 100, (5000,), generator=generator)
    pairs, inverse = unique_pairs(first, second)
    expected, expected_inverse = torch.unique(
        torch.stack([first, second]), dim=1, return_inverse=True
    )
    assert torch.equal(pairs, expected) and torch.equal(inverse, expected_inverse)


def test_a_profile_reweighs_stages_and_subtracts_not_interested() -> None:
    history = replace(
        events([(0, 1, 1.0, 1), (0, 2, 1.0, 0), (1, 2, 1.0, 1)], 2, 3),
        negative_user=torch.tensor([0, 0]),
        negative_item=torch.tensor([1, 0]),
        negative_time=torch.tensor([BEFORE - DAY, BEFORE - DAY]),
    )
    target = history.with_profile(Profile(stage_ratio=0.0))
    assert target.stage.tolist() == [1, 1] and target.weight.tolist() == [1.0, 1.0]
    assert target.pair_weights().dense(torch.arange(2)).tolist() == [[0, 1, 0], [0, 0, 1]]
    everything = history.with_profile(Profile(stage_ratio=0.5, negative=2.0))
    assert everything.pair_weights().dense(torch.arange(2)).tolist() == [
        [-2.0, 1.0 - 2.0, 0.5],
        [0.0, 0.0, 1.0],
    ]
    assert history.pair_weights().dense(torch.arange(2)).tolist() == [[0, 1, 0.5], [0, 0, 1]]
    assert history.popularity().tolist() == everything.popularity().tolist()


def test_profiled_grid_crosses_every_profile_with_the_own_axes() -> None:
    grid = profiled_grid({"a": (1, 2), "b": (3,)}, negatives=True)
    assert len(grid) == len(STAGE_RATIOS) * len(NEGATIVE_WEIGHTS) * 2
    first = {"profile": "target", "negative": 0.0, "b": 3}
    assert grid[:2] == ({**first, "a": 1}, {**first, "a": 2})
    assert {s["profile"] for s in profiled_grid({"a": (1,)})} == set(STAGE_RATIOS)


def test_popularity_counts_only_the_recent_window() -> None:
    # Item 0 was the hit long ago, item 1 is the hit of the last week.
    old = [(u, 0, 60.0, 1) for u in range(4)]
    history = events([*old, (0, 1, 2.0, 1), (1, 1, 3.0, 1)], 4, 3)
    recent, always = Popularity(window_days=7.0), Popularity(window_days=None)
    recent.fit(history)
    always.fit(history)
    assert recommend(recent, torch.tensor([3]), 1, history.popularity()).item() == 1
    assert recommend(always, torch.tensor([3]), 1, history.popularity()).item() == 0


def test_repeat_ranks_own_items_by_recency_then_popularity() -> None:
    history = events(
        [(0, 2, 30.0, 1), (0, 4, 1.0, 1), (0, 3, 10.0, 1), (1, 0, 1.0, 1), (2, 0, 1.0, 1)], 3, 5
    )
    repeat = Repeat(half_life_days=7.0)
    repeat.fit(history)
    ranked = recommend(repeat, torch.tensor([0, 1]), 4, history.popularity())
    assert ranked.tolist() == [[4, 3, 2, 0], [0, 2, 3, 4]]


def test_itemknn_equals_hand_computed_shrunk_cosine_with_top_neighbours() -> None:
    rows = [(0, 0, 1.0, 1), (0, 1, 1.0, 1), (1, 0, 1.0, 1), (1, 1, 1.0, 1), (1, 2, 1.0, 1)]
    rows += [(2, 2, 1.0, 1), (2, 3, 1.0, 0), (2, 2, 3.0, 1), (0, 0, 2.0, 1)]  # no ties
    history = events(rows, 3, 5)
    x = history.confidence().dense(torch.arange(3)).numpy().astype(np.float64)
    norm = np.linalg.norm(x, axis=0)
    cosine = np.divide(
        x.T @ x, np.outer(norm, norm), out=np.zeros((5, 5)), where=norm[:, None] * norm > 0
    )
    np.fill_diagonal(cosine, 0.0)
    both = (x > 0).T.astype(np.float64) @ (x > 0)
    memo = Memo()  # shared: the deeper fit's similarities serve the shallower one
    for shrink, neighbours, self_weight in [
        (0.0, 5, 0.0),
        (0.0, 1, 0.0),
        (2.0, 5, 0.5),
        (2.0, 2, 1),
    ]:
        shrunk = cosine * both / np.maximum(both + shrink, 1e-9)
        kept = np.zeros_like(shrunk)
        for j in range(5):
            top = np.argsort(-shrunk[j], kind="stable")[:neighbours]
            kept[j, top] = shrunk[j, top]
        expected = x @ kept + self_weight * x
        for knn in (
            ItemKNN(neighbours, shrink, self_weight, chunk=2),
            ItemKNN(neighbours, shrink, self_weight, chunk=2, memo=memo),
        ):
            knn.fit(history)
            np.testing.assert_allclose(knn.score(torch.arange(3)).numpy(), expected, atol=1e-6)


@pytest.mark.parametrize("num_users", [6, 3], ids=["cholesky", "woodbury"])
def test_ease_equals_the_numpy_closed_form_plus_buy_again(num_users: int) -> None:
    # Six users for five items take the Cholesky form; three, the users x users (Woodbury) one.
    rng = np.random.default_rng(0)
    rows = [(u, i, 1.0 + u % 2, 1) for u in range(6) for i in range(5) if rng.random() < 0.5]
    rows = [row for row in rows if row[0] < num_users] + [(i % 3, i, 1.0, 1) for i in range(5)]
    history = events([*rows, (0, 5, 1.0, 1)], 6, 7)  # item 5: one user; item 6: none
    x = history.confidence().dense(torch.arange(6)).numpy().astype(np.float64)
    memo = Memo()  # shared: one set of factors, one inverse per lambda
    for l2, repeat_weight in [(0.1, 0.0), (2.0, 0.5), (20.0, 0.5)]:
        ease = EASE(l2=l2, repeat_weight=repeat_weight, max_items=5, memo=memo)
        ease.fit(history)
        columns = ease.columns.tolist()
        assert sorted(columns) == [0, 1, 2, 3, 4]  # the five items with most users
        sub = x[:, columns]
        p = np.linalg.inv(sub.T @ sub + l2 * np.eye(5))
        b = -p / np.diag(p)
        np.fill_diagonal(b, 0.0)
        scores = ease.score(torch.arange(6)).numpy()
        np.testing.assert_allclose(scores[:, columns], sub @ b + repeat_weight * sub, atol=1e-4)
        assert (scores[1:, [5, 6]] == UNSCORED).all() and scores[0, 6] == UNSCORED
        assert scores[0, 5] == (
            pytest.approx(repeat_weight * x[0, 5]) if repeat_weight else UNSCORED
        )


def test_content_knn_scores_cold_items_by_their_content() -> None:
    text = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.2], [0.0, 0.0]])
    content = {"text": text, "has_text": torch.tensor([True, True, True, False])}
    history = events([(0, 0, 1.0, 1), (1, 1, 1.0, 1)], 2, 4)  # item 2 never seen: "cold"
    knn = ContentKNN(content, half_life_days=None)
    knn.fit(history)
    scores = knn.score(torch.tensor([0, 1]))
    expected = torch.nn.functional.normalize(text, dim=1)[:, :2] @ torch.eye(2)
    torch.testing.assert_close(scores, expected.T, atol=1e-6, rtol=0)
    assert recommend(knn, torch.tensor([0]), 2, history.popularity()).tolist() == [[0, 2]]


def test_content_knn_neighbour_form_passes_weight_to_the_nearest_items_only() -> None:
    # Items 0 and 1 point one way, 2 and 3 another; item 1 is cold (nobody engaged with it).
    text = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    content = {"text": text, "has_text": torch.ones(4, dtype=torch.bool)}
    history = events([(0, 0, 1.0, 1), (0, 2, 1.0, 0)], 1, 4)  # item 2 only at stage 0: 0.5
    knn = ContentKNN(content, half_life_days=None, neighbours=2)
    knn.fit(history)
    unit = torch.nn.functional.normalize(text, dim=1)
    cosine = unit @ unit.T
    expected = torch.zeros(4)
    expected[[0, 1]] = 1.0 * cosine[0, [0, 1]]  # item 0's two nearest: itself and item 1
    expected[[2, 3]] = 0.5 * cosine[2, [2, 3]]
    torch.testing.assert_close(knn.score(torch.tensor([0]))[0], expected, atol=1e-6, rtol=0)
    # One neighbour: only the user's own items, each at its own weight.
    one = ContentKNN(content, half_life_days=None, neighbours=1)
    one.fit(history)
    torch.testing.assert_close(one.score(torch.tensor([0]))[0], torch.tensor([1.0, 0, 0.5, 0]))


@pytest.mark.parametrize("alpha", [None, torch.tensor([0.4, 0.1, 0.3, 0.2])])
def test_lightgcn_propagation_matches_pygs_in_values_and_gradients(alpha) -> None:
    """Unequal layer weights too: a backward that summed the layers in the wrong order would
    pass with PyG's default, equal ones."""
    torch.manual_seed(0)
    user, item = torch.randint(5, (30,)), torch.randint(5, 12, (30,))
    weight = torch.rand(30) + 0.1
    pairs = torch.unique(torch.stack([user, item]), dim=1)  # one edge per pair, as `confidence`
    weight = weight[: pairs.shape[1]]
    model = LightGCN(12, 4, num_layers=3, alpha=alpha, normalize=False)  # the weights as given
    edge_index, edge_weight = gcn_norm(
        torch.cat([pairs, pairs.flip(0)], dim=1), weight.repeat(2), 12, add_self_loops=False
    )
    expected = model.get_embedding(edge_index, edge_weight)
    (expected * torch.arange(4.0)).sum().backward()
    assert model.embedding.weight.grad is not None
    expected_grad = model.embedding.weight.grad.clone()
    model.zero_grad()
    actual = propagate(model, symmetric_adjacency(pairs[0], pairs[1], weight, 12))
    (actual * torch.arange(4.0)).sum().backward()
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(model.embedding.weight.grad, expected_grad)


def test_lightgcn_learns_two_communities_and_is_deterministic() -> None:
    # Users 0-3 like items 0-3, users 4-7 items 4-7; each user misses one item of their group.
    rows = [
        (u, i, 1.0, 1) for u in range(8) for i in range(8) if (u < 4) == (i < 4) and u % 4 != i % 4
    ]
    history = events(rows, 8, 9)
    item_time = torch.zeros(9, dtype=torch.long)
    item_time[8] = BEFORE  # created at the cutoff: not scorable

    def fitted() -> torch.Tensor:
        model = LightGCNRecommender(
            item_time,
            num_layers=2,
            dim=16,
            budget=FitBudget(steps=40),
            batch_size=64,
            learning_rate=0.1,
            seed=3,
        )
        model.fit(history)
        return model.score(torch.arange(8))

    scores = fitted()
    assert torch.equal(scores, fitted())
    assert (scores[:, 8] == UNSCORED).all()
    for user in range(8):
        group = range(0, 4) if user < 4 else range(4, 8)
        missing = group[user % 4]
        others = [i for i in range(8) if i not in group]
        assert scores[user, missing] > scores[user, others].max()


def test_lightgcn_repeat_weight_adds_own_items_on_the_fit_it_shares() -> None:
    rows = [(u, i, 1.0, 1) for u in range(4) for i in range(4) if u != i]  # user u misses item u
    history = events(rows, 4, 5)
    memo = Memo()

    def fitted(repeat_weight: float) -> LightGCNRecommender:
        model = LightGCNRecommender(
            torch.zeros(5, dtype=torch.long),
            dim=8,
            budget=FitBudget(steps=30),
            batch_size=32,
            learning_rate=0.1,
            repeat_weight=repeat_weight,
            memo=memo,
        )
        model.fit(history)
        return model

    plain, blended = fitted(0.0), fitted(4.0)
    assert blended.users is plain.users and blended.items is plain.items  # one fit for both
    users = torch.arange(4)
    base, scores = plain.score(users), blended.score(users)
    own = history.confidence().dense(users)
    spread = base.std(dim=1, keepdim=True)
    torch.testing.assert_close(scores, base + 4.0 * spread * own)
    for user in range(4):  # every item the user had now ranks above the one they missed
        assert scores[user, [i for i in range(4) if i != user]].min() > scores[user, user]
