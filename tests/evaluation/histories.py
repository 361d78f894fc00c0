"""Hand-made interaction histories for the baselines' tests: rows of (user, item, days before the
cutoff, stage), the right answer known by construction."""

from __future__ import annotations

import torch

from hier_pipeline.evaluation.baselines import Interactions
from hier_pipeline.evaluation.baselines.interactions import DAY

BEFORE = 100 * DAY


def events(
    rows: list[tuple[int, int, float, int]], num_users: int, num_items: int, num_stages: int = 2
) -> Interactions:
    """(user, item, days before the cutoff, stage) rows; stage weights 0.5 and 1.0."""
    user, item, days, stage = (list(column) for column in zip(*rows, strict=True))
    stages = torch.tensor(stage)
    return Interactions(
        user=torch.tensor(user),
        item=torch.tensor(item),
        time=BEFORE - (torch.tensor(days) * DAY).long(),
        stage=stages,
        weight=torch.tensor([0.5, 1.0])[stages],
        num_users=num_users,
        num_items=num_items,
        num_stages=num_stages,
        before=BEFORE,
    )
