"""Choosing the ranker's tree size on held-out users: the folds and the held-out MAP@k."""

from __future__ import annotations

import numpy as np
import torch

from hier_pipeline.ranker.selection import candidate_ap, user_folds
from hier_pipeline.ranking.metrics import UserItems, per_user_metrics


def test_folds_are_balanced_and_fixed_by_seed() -> None:
    fold = user_folds(100, 3, seed=5)
    assert sorted(np.bincount(fold).tolist()) == [33, 33, 34]
    assert np.array_equal(fold, user_folds(100, 3, seed=5))
    assert not np.array_equal(fold, user_folds(100, 3, seed=6))


def test_candidate_ap_is_the_evaluations_ap_of_the_candidates_best_first() -> None:
    """Against `per_user_metrics` on the same lists, user by user; relevant items that are no
    candidate count as missed, users outside `users` or without a relevant item are left out."""
    rng = np.random.default_rng(0)
    num_users, num_items, k = 40, 60, 10
    rows, items = np.nonzero(rng.random((num_users, num_items)) < 0.3)
    scores = rng.random(len(rows))
    relevant_pairs = rng.random((num_users, num_items)) < 0.08
    relevant_pairs[:5] = False  # users without anything relevant
    relevant = UserItems.from_pairs(
        *map(torch.from_numpy, np.nonzero(relevant_pairs)), num_users, num_items
    )
    labels = relevant_pairs[rows, items]
    users = np.arange(0, num_users, 2)

    topk = torch.full((num_users, k), -1, dtype=torch.long)
    for user in range(num_users):
        mine = rows == user
        best = items[mine][np.argsort(-scores[mine], kind="stable")][:k]
        topk[user, : len(best)] = torch.from_numpy(best)
    expected = per_user_metrics(topk, relevant, (k,))[f"map@{k}"]
    judged = relevant.counts().numpy() > 0
    chosen = np.isin(np.flatnonzero(judged), users)
    got = candidate_ap(rows, items, scores, relevant, users, k)
    assert np.allclose(got, expected.numpy()[chosen])
    assert 0.0 < got.mean() < 1.0
    assert labels.any()
    nobody = candidate_ap(rows, items, scores, relevant, np.arange(5), k)
    assert len(nobody) == 0
