"""The judge of how the tree grows where no taxonomy is known: token retrieval of held-out events.

Which content modalities the finest codes read (`modalities.py`) and what the coarser levels
merge on (`merge.py`) are properties of the data, and the one judge a new database brings is its
own events: a tree grown on the events before the last tenth of them, each user's share of their
events per token from the same events, items scored by the tokens they share with the user (a
level-l token counting 2^l, as token retrieval does), recall@50 of the events after the cut
(every stage: the deepest alone, coupon redemptions on Complete Journey, is too rare to decide
on). A choice moves off its first, most stable option only where another is clearly better:
a few hundred users cannot tell close options apart, and a choice that flips between training
seeds would reshuffle the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hier_pipeline.interests.events import FunnelEvents

HELD_OUT = 0.1  # the last share of the events, by time, that a choice is scored on
MAX_USERS = 2000  # scored users at most, drawn by the tree's seed
TOP_K = 50
CHUNK = 256  # users scored at once: CHUNK x items floats
SIGNIFICANCE = 2.0  # standard errors an option must gain over the first to be chosen


@dataclass(frozen=True)
class HeldOut:
    """The events before the cut, the scored users (sorted node ids) and their events after it
    (users renumbered to rows of `users`)."""

    earlier: FunnelEvents
    users: Tensor
    targets: FunnelEvents

    @classmethod
    def of(cls, events: FunnelEvents | None, seed: int) -> HeldOut | None:
        """The split of `events`; None where no user has events on both sides of the cut."""
        if events is None or len(events) == 0:
            return None
        cut = int(np.quantile(events.time.numpy(), 1 - HELD_OUT))
        before = events.time < cut
        earlier, later = events.where(before), events.where(~before)
        both = np.intersect1d(earlier.users.unique().numpy(), later.users.unique().numpy())
        if len(both) == 0:
            return None
        drawn = torch.randperm(len(both), generator=torch.Generator().manual_seed(seed))
        users = torch.from_numpy(both)[drawn[:MAX_USERS].sort().values]
        return cls(earlier, users, later.of_users(users))

    def recall(self, labels: Tensor) -> Tensor:
        """Per user, recall@`TOP_K` of the later events when items are ranked by the tokens of
        `labels` they share with the user's earlier events (weights 2^stage), a level-l token
        counting 2^l; ties by the items' earlier event counts.
        Shapes: labels [items, L] -> [len(users)] float64."""
        items, levels = labels.shape
        popularity = torch.bincount(self.earlier.items, minlength=items).double()
        tie_break = popularity / (popularity.max() + 1) * 1e-6
        mine = self.earlier.of_users(self.users)
        weight = 2.0 ** mine.stage.double()
        truth = torch.zeros(len(self.users), items, dtype=torch.bool)
        truth[self.targets.users, self.targets.items] = True
        recalls = []
        for start in range(0, len(self.users), CHUNK):
            rows = slice(start, min(start + CHUNK, len(self.users)))
            chosen = (mine.users >= rows.start) & (mine.users < rows.stop)
            scores = tie_break.repeat(rows.stop - rows.start, 1)
            for level in range(levels):
                code = labels[:, level]
                shares = torch.zeros(
                    rows.stop - rows.start, int(code.max()) + 1, dtype=torch.float64
                )
                shares.index_put_(
                    (mine.users[chosen] - rows.start, code[mine.items[chosen]]),
                    weight[chosen],
                    accumulate=True,
                )
                shares /= shares.sum(dim=1, keepdim=True).clamp_min(1e-300)
                scores += 2.0**level * shares[:, code]
            top = scores.topk(TOP_K, dim=1).indices
            hits = truth[rows].gather(1, top).sum(dim=1).double()
            recalls.append(hits / truth[rows].sum(dim=1).clamp_min(1))
        return torch.cat(recalls)


def first_unless_clearly_beaten(recalls: list[Tensor]) -> int:
    """The index of the option to take among per-user recalls of options in order of
    preference: the best, where its paired gain over the first exceeds `SIGNIFICANCE`
    standard errors, else the first."""
    best = max(range(len(recalls)), key=lambda option: float(recalls[option].mean()))
    gain = recalls[best] - recalls[0]
    clear = float(gain.mean()) > SIGNIFICANCE * float(gain.std()) / len(gain) ** 0.5
    return best if clear else 0
