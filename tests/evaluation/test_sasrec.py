"""SASRec: its sequences, its determinism under a seed, a next-item task it must learn, and the
tiny synthetic world end to end."""

from __future__ import annotations

import math

import torch

from hier_pipeline.evaluation.baselines import FitBudget, Interactions, SASRec, evaluate_baselines
from tests.evaluation.histories import events


def test_sequences_are_time_ordered_collapsed_truncated_and_left_padded() -> None:
    history = events(
        [
            (0, 4, 1.0, 1),
            (0, 2, 3.0, 0),
            (0, 2, 2.9, 1),  # seen then bought: one step
            (0, 1, 5.0, 1),
            (0, 3, 4.0, 1),
            (1, 0, 1.0, 0),
        ],
        num_users=3,
        num_items=5,
    )
    sequences = SASRec(max_length=3, target_only=False).user_sequences(history)
    assert sequences.tolist() == [[2, 4, 3, 5], [0, 0, 0, 1], [0, 0, 0, 0]]  # items + 1
    target = SASRec(max_length=3).user_sequences(history)  # target-stage events only
    assert target.tolist() == [[2, 4, 3, 5], [0, 0, 0, 0], [0, 0, 0, 0]]


def chains(users_per_chain: int) -> Interactions:
    """Users who engage with 0 -> 1 -> 2 or with 3 -> 4 -> 5, a day apart, and last two users
    half-way along each chain (0 -> 1 and 3 -> 4)."""
    rows = [
        (2 * u + c, 3 * c + step, 10.0 - step, 1)
        for u in range(users_per_chain + 1)
        for c in (0, 1)
        for step in range(2 if u == users_per_chain else 3)
    ]
    return events(rows, 2 * users_per_chain + 2, 6)


def test_same_seed_same_steps_same_scores() -> None:
    history = chains(4)

    def scores(seed: int) -> torch.Tensor:
        model = SASRec(max_length=4, dim=8, budget=FitBudget(steps=5), batch_size=4, seed=seed)
        model.fit(history)
        return model.score(torch.arange(8))

    first = scores(3)
    assert first.shape == (8, 6)
    assert torch.isfinite(first).all()
    assert torch.equal(first, scores(3))
    assert not torch.equal(first, scores(4))


def test_it_learns_the_next_item_of_a_chain() -> None:
    history = chains(20)
    model = SASRec(
        max_length=4, dim=16, negatives=6, batch_size=32, budget=FitBudget(steps=150), seed=0
    )
    model.fit(history)
    assert model.score(torch.tensor([40, 41])).argmax(1).tolist() == [2, 5]


def test_sasrec_on_the_tiny_world(synthetic_pipeline) -> None:
    graph, content, split = synthetic_pipeline
    result = evaluate_baselines(graph, content, split, names=["sasrec"], budget=FitBudget(steps=5))
    assert result.num_users > 0
    for metric, value in result.metrics["sasrec"].items():
        assert (metric.startswith("cold") and math.isnan(value)) or 0.0 <= value <= 1.0, metric
