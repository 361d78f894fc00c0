"""A user's own earlier engagements with an item, as of any time: the personal-history signal.

In repeat-heavy domains (grocery: most purchases re-buy an earlier product) the strongest single
predictor of a deep-funnel event is that the user engaged with that very item before, and how
recently. An embedding inner product cannot express "this user's 300 past items" sharply in 64
dimensions, so the model scores (user, item) pairs with an explicit, learned history term on top
of the inner product (`HistoryBias`). This module answers the lookups it needs, vectorised:

    features(u, i, t) = [log(1 + count of u's events on i before t, per funnel stage and for
                         negative feedback) ..., log(1 + days since the last of them)]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from hier_pipeline.graph.build import RelationalGraph

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class _Channel:
    """The events of one channel (a stage, or negative feedback), sorted by (pair, time).

    `order` holds pair_id * R + time_rank per event, ascending, with R = number of distinct
    times + 1, so one `searchsorted` finds the events of a pair before a time."""

    order: np.ndarray
    times: np.ndarray  # per event, in the same order
    first: np.ndarray  # per pair id: index of its first event in `order`


class InteractionHistory:
    """Answers "what did user u do with item i before time t" for millions of (u, i, t) at once."""

    def __init__(
        self,
        users: np.ndarray,
        items: np.ndarray,
        times: np.ndarray,
        channels: np.ndarray,
        num_channels: int,
        num_items: int,
    ) -> None:
        self.num_items, self.num_channels = num_items, num_channels
        keys = users.astype(np.int64) * num_items + items
        self.pairs = np.unique(keys)  # every (user, item) ever engaged, ascending
        self.distinct_times = np.unique(times)
        pair_id = np.searchsorted(self.pairs, keys)
        self.first_time = np.full(len(self.pairs), np.iinfo(np.int64).max)
        np.minimum.at(self.first_time, pair_id, times.astype(np.int64))
        rank = np.searchsorted(self.distinct_times, times)
        scale = len(self.distinct_times) + 1
        self.channels = []
        for channel in range(num_channels):
            chosen = channels == channel
            order = pair_id[chosen] * scale + rank[chosen]
            sort = np.argsort(order, kind="stable")
            order, channel_times = order[sort], times[chosen][sort]
            first = np.searchsorted(order, np.arange(len(self.pairs), dtype=np.int64) * scale)
            self.channels.append(_Channel(order, channel_times, first))

    @classmethod
    def of(cls, graph: RelationalGraph) -> InteractionHistory:
        """Every `engaged` edge: channels are the funnel stages, then negative feedback."""
        engaged = graph.data[graph.metadata.engaged]
        stages = len(graph.metadata.stages)
        channel = engaged.edge_stage.clone()
        channel[engaged.edge_negative] = stages
        keep = (channel >= 0).numpy()
        return cls(
            engaged.edge_index[0].numpy()[keep],
            engaged.edge_index[1].numpy()[keep],
            engaged.edge_time.numpy()[keep],
            channel.numpy()[keep],
            stages + 1,
            int(graph.data[graph.metadata.item_type].num_nodes),
        )

    @property
    def num_features(self) -> int:
        return self.num_channels + 1

    def features(self, users: Tensor, items: Tensor, before: Tensor) -> Tensor:
        """Counts per channel and days since the last event, strictly before `before`, log1p'd.

        Pairs without any earlier event get all zeros; negative item ids (absent candidates)
        count as never engaged. Shapes: users, items, before: [P] -> [P, C + 1].
        """
        if len(self.pairs) == 0:
            return torch.zeros(len(users), self.num_features)
        keys = users.numpy().astype(np.int64) * self.num_items + items.numpy()
        pair = np.searchsorted(self.pairs, keys).clip(max=len(self.pairs) - 1)
        known = (items.numpy() >= 0) & (self.pairs[pair] == keys)
        when = before.numpy()
        query = pair * (len(self.distinct_times) + 1) + np.searchsorted(self.distinct_times, when)
        counts = np.zeros((len(keys), self.num_channels))
        last = np.full(len(keys), -np.inf)
        for index, channel in enumerate(self.channels):
            end = np.searchsorted(channel.order, query)
            counts[:, index] = np.where(known, end - channel.first[pair], 0)
            seen = counts[:, index] > 0
            last[seen] = np.maximum(last[seen], channel.times[end[seen] - 1])
        days = np.where(np.isfinite(last), (when - last) / SECONDS_PER_DAY, 0.0)
        return torch.from_numpy(np.log1p(np.column_stack([counts, days]))).float()

    def engaged_before(self, users: Tensor, items: Tensor, before: Tensor) -> Tensor:
        """Whether user u had any event on item i strictly before `before` (any channel).
        Shapes: users, items, before: [P] -> [P] bool."""
        if len(self.pairs) == 0:
            return torch.zeros(len(users), dtype=torch.bool)
        keys = users.numpy().astype(np.int64) * self.num_items + items.numpy()
        pair = np.searchsorted(self.pairs, keys).clip(max=len(self.pairs) - 1)
        known = (items.numpy() >= 0) & (self.pairs[pair] == keys)
        return torch.from_numpy(known & (self.first_time[pair] < before.numpy()))

    def sample_earlier(
        self,
        users: Tensor,
        avoid: Tensor,
        before: Tensor,
        rng: np.random.Generator,
        tries: int = 4,
    ) -> Tensor:
        """Per row, an item the user engaged with strictly before `before`, other than `avoid`
        (uniform over such items, by rejection); -1 where `tries` draws found none.
        Shapes: users, avoid, before: [B] -> [B] long."""
        first_key = users.numpy().astype(np.int64) * self.num_items
        lower = np.searchsorted(self.pairs, first_key)
        counts = np.searchsorted(self.pairs, first_key + self.num_items) - lower
        chosen = np.full(len(users), -1, dtype=np.int64)
        for _ in range(tries):
            pick = lower + (rng.random(len(users)) * counts).astype(np.int64)
            pair = pick.clip(max=max(len(self.pairs) - 1, 0))
            item = self.pairs[pair] % self.num_items if len(self.pairs) else chosen
            valid = (counts > 0) & (chosen < 0) & (item != avoid.numpy())
            valid &= self.first_time[pair] < before.numpy() if len(self.pairs) else False
            chosen[valid] = item[valid]
        return torch.from_numpy(chosen)

    def pairs_of(self, users: Tensor, before: int) -> tuple[Tensor, Tensor, Tensor]:
        """Every (row, item) with an event strictly before `before`, `row` indexing `users`, and
        its features: the sparse part of a full ranking. Shapes: users [U] -> [P], [P], [P, F]."""
        first_key = users.numpy().astype(np.int64) * self.num_items
        lower = np.searchsorted(self.pairs, first_key)
        counts = np.searchsorted(self.pairs, first_key + self.num_items) - lower
        offsets = np.cumsum(counts) - counts
        index = np.arange(counts.sum()) - np.repeat(offsets, counts) + np.repeat(lower, counts)
        rows = torch.from_numpy(np.repeat(np.arange(len(users)), counts))
        items = torch.from_numpy(self.pairs[index] % self.num_items)
        features = self.features(users[rows], items, torch.full_like(items, before))
        earlier = features[:, : self.num_channels].sum(dim=1) > 0
        return rows[earlier], items[earlier], features[earlier]


class HistoryBias(nn.Module):
    """A learned additive score for a user's earlier engagements with the item (0 when none).

        b(u, i, t) = [any earlier event] * MLP(features(u, i, t))

    Shapes: features [P, F] -> [P].
    """

    def __init__(self, num_features: int, hidden: int = 16) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(num_features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    @classmethod
    def for_stages(cls, num_stages: int) -> HistoryBias:
        """Features of `InteractionHistory.of`: a count per funnel stage and for negative
        feedback, and days since the last event."""
        return cls(num_stages + 2)

    def forward(self, features: Tensor) -> Tensor:
        engaged = (features[:, :-1].sum(dim=1) > 0).float()
        return engaged * self.mlp(features).squeeze(-1)
