from __future__ import annotations

import math

import pytest
import torch

from hier_pipeline.model.losses import (
    bpr_loss,
    default_stage_weights,
    funnel_softmax_loss,
    primitive_usage_loss,
)

WEIGHTS = default_stage_weights(3)  # impression, click, purchase
IDS = torch.tensor([0, 1, 2, 3])
PURCHASE = torch.full((4,), 2)


def test_default_stage_weights_are_geometric_with_the_deepest_at_one() -> None:
    assert torch.allclose(default_stage_weights(3), torch.tensor([0.09, 0.3, 1.0]))
    assert torch.allclose(default_stage_weights(1), torch.tensor([1.0]))


def test_matches_the_hand_computed_softmax() -> None:
    user = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    item = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    # user 0 scores (2, 1); user 1 scores (0, 1); both purchases (weight 1).
    expected = 0.5 * (
        -math.log(math.exp(2) / (math.exp(2) + math.exp(1)))
        - math.log(math.exp(1) / (math.exp(0) + math.exp(1)))
    )
    loss = funnel_softmax_loss(user, item, torch.tensor([0, 1]), torch.tensor([2, 2]), WEIGHTS)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_log_q_correction_subtracts_each_candidates_log_expected_count() -> None:
    user = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    item = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    random = torch.tensor([[0.0, 3.0]])
    hard = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    log_q = torch.log(torch.tensor([4.0, 1.0, 2.0]))  # in-batch, random; hard: not corrected
    # Columns: item 0, item 1 (in batch), the random item, the event's hard item.
    rows = [
        [2 - math.log(4), 1 - math.log(1), 0 - math.log(2), 1.0],
        [0 - math.log(4), 1 - math.log(1), 3 - math.log(2), 0.0],
    ]
    expected = sum(
        -math.log(math.exp(row[b]) / sum(map(math.exp, row))) for b, row in enumerate(rows)
    )
    loss = funnel_softmax_loss(
        user,
        item,
        torch.tensor([0, 1]),
        torch.tensor([2, 2]),
        WEIGHTS,
        random_negatives=random,
        hard_negatives=hard,
        log_q=log_q,
    )
    assert loss.item() == pytest.approx(expected / 2, rel=1e-6)


def test_lower_when_positives_score_higher_and_gradients_flow() -> None:
    torch.manual_seed(0)
    user = torch.randn(4, 8, requires_grad=True)
    item = torch.randn(4, 8)
    aligned = funnel_softmax_loss(user, user.detach() * 3, IDS, PURCHASE, WEIGHTS)
    random = funnel_softmax_loss(user, item, IDS, PURCHASE, WEIGHTS)
    assert aligned < random
    random.backward()
    assert user.grad is not None and user.grad.abs().sum() > 0


def test_a_purchase_counts_more_than_an_impression() -> None:
    torch.manual_seed(0)
    user, item = torch.randn(4, 8), torch.randn(4, 8)
    purchase = funnel_softmax_loss(user, item, IDS, torch.tensor([2, 0, 0, 0]), WEIGHTS)
    impression = funnel_softmax_loss(user, item, IDS, torch.tensor([0, 0, 0, 0]), WEIGHTS)
    assert purchase > impression
    # the first event's loss, computed in full context, enters with weight 1.0 instead of 0.09
    with_context = funnel_softmax_loss(
        user, item, IDS, torch.tensor([2, 0, 0, 0]), torch.tensor([0.0, 0.0, 1.0])
    )
    assert (purchase - impression).item() == pytest.approx(
        with_context.item() * (1 - 0.09), rel=1e-5
    )


def test_hard_negatives_are_negatives_only_where_present() -> None:
    torch.manual_seed(0)
    user, item = torch.randn(4, 8), torch.randn(4, 8)
    base = funnel_softmax_loss(user, item, IDS, PURCHASE, WEIGHTS)
    hard = user * 5  # each user's "not interested" item scores very high for that user
    with_hard = funnel_softmax_loss(user, item, IDS, PURCHASE, WEIGHTS, hard_negatives=hard)
    assert with_hard > base + 1.0
    none_present = torch.zeros(4, dtype=torch.bool)
    masked = funnel_softmax_loss(
        user, item, IDS, PURCHASE, WEIGHTS, hard_negatives=hard, hard_negative_mask=none_present
    )
    assert masked.item() == pytest.approx(base.item(), rel=1e-6)


def test_random_negatives_add_to_the_denominator() -> None:
    torch.manual_seed(0)
    user, item = torch.randn(4, 8), torch.randn(4, 8)
    base = funnel_softmax_loss(user, item, IDS, PURCHASE, WEIGHTS)
    assert (
        funnel_softmax_loss(user, item, IDS, PURCHASE, WEIGHTS, random_negatives=torch.randn(16, 8))
        > base
    )


def test_in_batch_duplicates_of_the_positive_are_not_negatives() -> None:
    torch.manual_seed(0)
    user, item = torch.randn(3, 8), torch.randn(3, 8)
    item[2] = item[0]  # events 0 and 2 are the same item
    duplicate_ids = torch.tensor([5, 6, 5])
    loss = funnel_softmax_loss(user, item, duplicate_ids, torch.tensor([2, 2, 2]), WEIGHTS)
    # by hand: each of events 0 and 2 sees only itself and item 6
    scores = user @ item.T
    expected = (
        sum(-torch.log_softmax(scores[b, [b, 1]], dim=0)[0] for b in (0, 2))
        - torch.log_softmax(scores[1], dim=0)[1]
    )
    assert loss.item() == pytest.approx(expected.item() / 3, rel=1e-5)


def test_rejects_events_without_a_stage() -> None:
    user = torch.randn(2, 4)
    with pytest.raises(ValueError, match="stage"):
        funnel_softmax_loss(user, user, torch.tensor([0, 1]), torch.tensor([-1, 2]), WEIGHTS)


def test_bpr_by_hand_and_weighted() -> None:
    user = torch.tensor([[1.0, 0.0]])
    positive, negative = torch.tensor([[2.0, 0.0]]), torch.tensor([[1.0, 5.0]])
    assert bpr_loss(user, positive, negative).item() == pytest.approx(math.log1p(math.exp(-1.0)))
    weighted = bpr_loss(user, positive, negative, torch.tensor([0.3]))
    assert weighted.item() == pytest.approx(0.3 * math.log1p(math.exp(-1.0)))
    assert bpr_loss(user, negative, positive) > bpr_loss(user, positive, negative)


def test_primitive_usage_is_lowest_when_every_primitive_is_used() -> None:
    uniform = torch.eye(4)  # four entities, each on its own primitive: mean is uniform
    collapsed = torch.zeros(4, 4)
    collapsed[:, 0] = 1.0
    assert primitive_usage_loss(uniform).item() == pytest.approx(-math.log(4))
    assert primitive_usage_loss(collapsed).item() == pytest.approx(0.0, abs=1e-6)
    assert primitive_usage_loss(uniform, normalised=True).item() == pytest.approx(0.0, abs=1e-6)
    assert primitive_usage_loss(collapsed, normalised=True).item() == pytest.approx(1.0)
    logits = torch.randn(6, 4, requires_grad=True)
    primitive_usage_loss(logits.softmax(dim=1)).backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0
