from __future__ import annotations

import math

import numpy as np
import torch

from hier_pipeline.model.history import HistoryBias, InteractionHistory
from hier_pipeline.ranking.metrics import PairScores, topk_in_chunks

DAY = 86_400
# user 0 bought item 2 on days 1 and 3 (channel 1) and viewed item 1 on day 2 (channel 0);
# user 1 said "not interested" in item 2 on day 5 (channel 2).
HISTORY = InteractionHistory(
    users=np.array([0, 0, 0, 1]),
    items=np.array([2, 1, 2, 2]),
    times=np.array([1, 2, 3, 5]) * DAY,
    channels=np.array([1, 0, 1, 2]),
    num_channels=3,
    num_items=4,
)


def _features(user: int, item: int, day: float) -> list[float]:
    features = HISTORY.features(
        torch.tensor([user]), torch.tensor([item]), torch.tensor([int(day * DAY)])
    )
    return features[0].tolist()


def test_counts_each_channel_strictly_before_the_time() -> None:
    log = math.log1p
    assert _features(0, 2, 1) == [0.0, 0.0, 0.0, 0.0]  # the event itself is not history
    assert np.allclose(_features(0, 2, 2), [0.0, log(1), 0.0, log(1)])
    assert np.allclose(_features(0, 2, 4), [0.0, log(2), 0.0, log(1)])  # last on day 3
    assert np.allclose(_features(0, 1, 10), [log(1), 0.0, 0.0, log(8)])
    assert np.allclose(_features(1, 2, 6), [0.0, 0.0, log(1), log(1)])


def test_unknown_pairs_and_absent_candidates_have_no_history() -> None:
    assert _features(1, 1, 10) == [0.0] * 4
    assert _features(0, -1, 10) == [0.0] * 4
    assert _features(3, 0, 10) == [0.0] * 4  # a user never seen


def test_pairs_of_lists_each_users_earlier_items_in_row_order() -> None:
    rows, items, features = HISTORY.pairs_of(torch.tensor([1, 0]), before=int(2.5 * DAY))
    assert list(zip(rows.tolist(), items.tolist(), strict=True)) == [(1, 1), (1, 2)]
    assert torch.allclose(
        features, HISTORY.features(torch.tensor([0, 0]), items, torch.full((2,), int(2.5 * DAY)))
    )


def test_bias_is_zero_without_history_and_learnable_with_it() -> None:
    torch.manual_seed(0)
    bias = HistoryBias(HISTORY.num_features)
    features = HISTORY.features(
        torch.tensor([0, 1]), torch.tensor([2, 1]), torch.full((2,), 10 * DAY)
    )
    values = bias(features)
    assert values[1].item() == 0.0
    values[0].backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in bias.parameters())


def test_pair_scores_change_the_full_ranking() -> None:
    users, items = torch.eye(2), torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.0]])
    assert topk_in_chunks(users, items, 1).flatten().tolist() == [0, 1]
    boost = PairScores(torch.tensor([0, 1]), torch.tensor([2, 0]), torch.tensor([1.0, 2.0]))
    assert topk_in_chunks(users, items, 1, chunk=1, pair_scores=boost).flatten().tolist() == [2, 0]


def test_sample_earlier_draws_only_earlier_items_other_than_the_positive() -> None:
    rng = np.random.default_rng(0)
    sampled = HISTORY.sample_earlier(
        torch.tensor([0, 0, 1, 3]),
        avoid=torch.tensor([2, 2, 0, 0]),
        before=torch.tensor([int(2.5 * DAY), int(1.5 * DAY), 6 * DAY, 6 * DAY]),
        rng=rng,
        tries=64,
    )
    # user 0: item 1 (first on day 2) is the only earlier item besides the positive 2;
    # before day 1.5 only item 2 existed; user 1's only item is 2; user 3 has no history.
    assert sampled.tolist() == [1, -1, 2, -1]


def test_engaged_before_knows_any_channel_strictly_before_the_time() -> None:
    engaged = HISTORY.engaged_before(
        torch.tensor([0, 0, 0, 1, 1, 3, 0]),
        torch.tensor([2, 2, 1, 2, 2, 0, -1]),
        torch.tensor([1, 2, 2, 5, 6, 9, 9]) * DAY,
    )
    # user 0's item 2 from day 1 on (strictly after), item 1 after day 2; user 1's
    # "not interested" counts as an event; unknown users and absent items never do.
    assert engaged.tolist() == [False, True, False, False, True, False, False]
