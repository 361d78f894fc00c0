"""The ranker's counting features against a direct per-pair recount of the tiny synthetic world."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hier_pipeline.graph.build import NEVER
from hier_pipeline.ranker.counts import SECONDS_PER_DAY, Counts, FunnelLog, feature_names


@pytest.fixture(scope="module")
def log(synthetic_pipeline: tuple) -> FunnelLog:
    return FunnelLog.of(synthetic_pipeline[0])


@pytest.fixture(scope="module")
def counts(log: FunnelLog) -> Counts:
    as_of = int(np.quantile(log.time, 0.7))
    return Counts(log, as_of, horizon=int(60 * SECONDS_PER_DAY))


def _days(seconds: float) -> float:
    return math.log1p(seconds / SECONDS_PER_DAY)


def _recount(log: FunnelLog, as_of: int, horizon: int, user: int, item: int) -> list[float]:
    """The feature row of (user, item), from the events one by one."""
    past = log.time < as_of
    lately = past & (log.time >= as_of - horizon)
    positive = past & ~log.negative & (log.stage >= 0)
    target = positive & (log.stage == log.target)
    mine, its = (log.user == user), (log.item == item)
    pair = mine & its
    row = [math.log1p(np.sum(pair & positive & (log.stage == s))) for s in range(len(log.stages))]
    row.append(math.log1p(np.sum(pair & past & log.negative)))
    row.append(math.log1p(np.sum(pair & target & lately)))
    for mask in (pair & positive, pair & target):
        row.append(_days(as_of - log.time[mask].max()) if mask.any() else math.nan)
    buyers = {u: np.sum(target & its & (log.user == u)) for u in set(log.user[target & its])}
    row += [
        math.log1p(np.sum(its & target & lately)),
        math.log1p(np.sum(its & positive & lately)),
        math.log1p(np.sum(its & target)),
        sum(n >= 2 for n in buyers.values()) / len(buyers) if buyers else math.nan,
        _days(as_of - log.time[its & positive].min()) if (its & positive).any() else math.nan,
        math.log1p(len(set(log.item[mine & positive]))),
        math.log1p(np.sum(mine & target & lately)),
        math.log1p(np.sum(mine & target)),
        _days(as_of - log.time[mine & positive].max()) if (mine & positive).any() else math.nan,
        _days(max(as_of - log.item_listed[item], 0))
        if log.item_listed[item] != NEVER
        else math.nan,
    ]
    return row


def test_features_match_a_recount_of_every_sampled_pair(log: FunnelLog, counts: Counts) -> None:
    rng = np.random.default_rng(0)
    engaged = rng.choice(len(log.user), 30, replace=False)
    users = np.concatenate([log.user[engaged], rng.integers(0, log.num_users, 10)])
    items = np.concatenate([log.item[engaged], rng.integers(0, log.num_items, 10)])
    features = counts.features(torch.from_numpy(users), torch.from_numpy(items))
    assert features.shape == (40, len(feature_names(log.stages)))
    for row, (user, item) in enumerate(zip(users, items, strict=True)):
        expected = _recount(log, counts.as_of, counts.horizon, int(user), int(item))
        assert np.allclose(features[row], expected, equal_nan=True, atol=1e-5), (user, item)


def test_history_pairs_are_every_earlier_pair_of_each_user(log: FunnelLog, counts: Counts) -> None:
    users = torch.tensor([3, 0, 7])
    rows, items = counts.history_pairs(users)
    past = log.time < counts.as_of
    for row, user in enumerate(users.tolist()):
        expected = set(log.item[past & (log.user == user)].tolist())
        assert set(items[rows == row].tolist()) == expected
    assert torch.equal(rows, rows.sort().values)


def test_popular_items_are_the_most_bought_lately(log: FunnelLog, counts: Counts) -> None:
    lately = (log.time < counts.as_of) & (log.time >= counts.as_of - counts.horizon)
    bought = np.bincount(log.item[lately & (log.stage == log.target) & ~log.negative])
    top = counts.popular(5).numpy()
    assert len(top) == min(5, np.sum(bought > 0)) > 1
    assert list(bought[top]) == sorted(bought[bought > 0], reverse=True)[:5]
