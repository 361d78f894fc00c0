"""Tuning: the grid a baseline tries, the setting `tune` keeps, and the successive halving
`tune_trained` runs for trained baselines."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from hier_pipeline.evaluation.baselines import (
    STEPS,
    Halving,
    Interactions,
    Popularity,
    tune,
    tune_trained,
)
from hier_pipeline.evaluation.baselines.evaluate import tuning_grid
from hier_pipeline.evaluation.baselines.interactions import DAY
from hier_pipeline.evaluation.baselines.profiles import STAGE_RATIOS, profiled_grid
from hier_pipeline.ranking.metrics import UserItems
from hier_pipeline.ranking.window import EvaluationWindow
from tests.evaluation.histories import BEFORE, events


def test_negative_settings_are_tuned_only_where_negatives_exist() -> None:
    grid = profiled_grid({"half_life_days": (15.0,)}, negatives=True)
    history = events([(0, 1, 1.0, 1)], 1, 2)
    assert [s["negative"] for s in tuning_grid(grid, history)] == [0.0] * len(STAGE_RATIOS)
    with_negative = replace(
        history,
        negative_user=torch.tensor([0]),
        negative_item=torch.tensor([0]),
        negative_time=torch.tensor([0]),
    )
    assert tuning_grid(grid, with_negative) == list(grid)


def test_tune_keeps_the_setting_best_on_the_window() -> None:
    old = [(u, 0, 60.0, 1) for u in range(4)]
    history = events([*old, (0, 1, 2.0, 1), (1, 1, 3.0, 1)], 4, 3)
    window = EvaluationWindow(
        torch.tensor([2, 3]),
        UserItems.from_pairs(torch.tensor([0, 1]), torch.tensor([1, 1]), 2, 3),
        BEFORE,
        BEFORE + 7 * DAY,
    )
    grid = [{"window_days": None}, {"window_days": 7.0}, {"window_days": 8.0}]
    result = tune(lambda s: Popularity(**s), grid, history, window, exclude_seen=False)
    assert result.best == {"window_days": 7.0}
    assert [score for _, score in result.scores] == pytest.approx([0.5, 1.0, 1.0])


class Placed:
    """A fit that ranks item 0 at `position` (1 = first) and the other items in id order."""

    def __init__(self, position: int, num_items: int = 12) -> None:
        order = list(range(1, num_items))
        order.insert(position - 1, 0)
        self.scores = torch.zeros(num_items)
        self.scores[order] = torch.arange(num_items, 0, -1).float()

    def fit(self, history: Interactions) -> None:
        pass

    def score(self, users: torch.Tensor) -> torch.Tensor:
        return self.scores.expand(len(users), -1)


def test_tune_trained_halves_the_grid_and_keeps_the_best_fit_of_any_length() -> None:
    """Nine fits, each scored at two buy-again weights `w` from one fit. Fit 1 learns slowly: it
    leads at the second rung and overfits by the third, so it wins at the second's length; fit 8
    would lead at the second rung too but trails at the first (what halving gives up)."""
    history = events([(0, 1, 1.0, 1), (1, 2, 1.0, 1)], 2, 12)
    window = EvaluationWindow(
        torch.tensor([0, 1]),
        UserItems.from_pairs(torch.tensor([0, 1]), torch.tensor([0, 0]), 2, 12),
        BEFORE,
        BEFORE + 7 * DAY,
    )
    short = {0: 2, 1: 3, 2: 4}  # item 0's position after the shortest fit; the rest 9
    built: list[tuple[int, int, int]] = []

    def build(setting: dict[str, int]) -> Placed:
        fit, steps = setting["fit"], setting[STEPS]
        built.append((fit, setting["w"], steps))
        position = short.get(fit, 9)
        if fit in (1, 8) and steps >= 33:
            position = 1 if steps < 99 else 2
        return Placed(position + 1 - setting["w"])  # w = 1 places it one higher

    grid = [{"fit": fit, "w": w} for fit in range(9) for w in (0, 1)]
    result = tune_trained(build, grid, history, window, False, 99, shared=("w",))
    assert Halving().steps(99) == [11, 33, 99]
    assert built == [
        *((fit, w, 11) for fit in range(9) for w in (0, 1)),
        *((fit, w, 33) for fit in (0, 1, 2) for w in (0, 1)),
        (1, 0, 99),
        (1, 1, 99),
    ]
    assert result.best == {"fit": 1, "w": 1, STEPS: 33}
    scores = {(s["fit"], s["w"], s[STEPS]): score for s, score in result.scores}
    assert list(scores) == built  # every fit tried, in the order tried
    assert scores[(1, 1, 33)] == 1.0 and scores[(1, 1, 99)] == 0.5
    assert scores[(8, 1, 11)] == pytest.approx(1 / 9)

    built.clear()  # two fits: the first rung keeps one; equal scores keep the shortest fit
    two = tune_trained(build, grid[:4], history, window, False, 99, shared=("w",))
    assert built == [
        (0, 0, 11),
        (0, 1, 11),
        (1, 0, 11),
        (1, 1, 11),
        (0, 0, 33),
        (0, 1, 33),
        (0, 0, 99),
        (0, 1, 99),
    ]
    assert two.best == {"fit": 0, "w": 1, STEPS: 11}
