"""How much of each user's engagement falls in each interest, per level of the tree: the Bags of
Meaning without truncation, as signals for the ranker.

Why. A user's Bag-of-Meaning keeps the top few tokens per level (`TokenConfig.top_k`), and token
retrieval folds the levels into one overlap score: right for an index, lossy for a ranker. The
share of a user's weighted events in the item's own token, level by level, is the estimate of
"how much of this user's interest is this item's interest" at every granularity, and next to
the item's popularity it is what the ranker needs to rank a user's interests' items, seen or not.
On the synthetic world, these shares over the planted taxonomy lifted the ranked row's
recall@50 from 0.650 to 0.738 and its explore recall from 0.456 to 0.586 (seed 0, docs).

    share_l(u, i) = sum of u's event weights on items of token_l(i) / sum of all u's event weights

over u's positive events before `as_of`, weighted as the bags are (`event_weights`: funnel stage
and recency); 0 for a user without events.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hier_pipeline.interests.engaged import event_weights
from hier_pipeline.interests.events import FunnelEvents
from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.tokens import TokenConfig


@dataclass(frozen=True)
class LevelShares:
    """Shapes: shares, one per level, [U, tokens of the level]; codes [I, L], each item's token
    per level, numbered within its level."""

    shares: list[Tensor]
    codes: Tensor

    @property
    def levels(self) -> int:
        return len(self.shares)

    def score(self, level: int, rows: Tensor) -> Tensor:
        """share_level(u, i) of the users at `rows` for every item. Shapes: rows [R] -> [R, I]."""
        return self.shares[level][rows][:, self.codes[:, level]]


def level_shares(
    events: FunnelEvents,
    num_users: int,
    hierarchy: InterestHierarchy,
    config: TokenConfig,
    as_of: int,
) -> LevelShares:
    """Every user's shares (module doc); `events.users` index the `num_users` rows, their items
    the tree's `members`."""
    kept = events.where(events.time < as_of)
    weight = event_weights(kept, as_of, config)
    total = torch.zeros(num_users, dtype=torch.float64).index_add_(0, kept.users, weight)
    codes = hierarchy.members - torch.tensor(hierarchy.offsets[:-1])
    shares = []
    for level, size in enumerate(hierarchy.primitives_per_level()):
        summed = torch.zeros(num_users, size, dtype=torch.float64)
        summed.index_put_((kept.users, codes[kept.items, level]), weight, accumulate=True)
        shares.append((summed / total.clamp_min(1e-300).unsqueeze(1)).float())
    return LevelShares(shares, codes)
