"""What each user did with each item, what each item and each user did lately: the counting
features of the second-stage ranker, all as of one time T (strictly before it) and over one
horizon h (the length of the window ranked for, so "lately" means [T - h, T)).

Why counts next to the embedding: in repeat-heavy domains most deep-funnel events re-buy an earlier
item, and how often and how recently a user bought it, and how often anyone re-buys it, decide
them; an inner product in 64 dimensions cannot hold a user's 300 earlier items sharply. Every
figure is log1p'd; a time that does not exist (never bought) is NaN, which the ranker's trees
route on their own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hier_pipeline.graph.build import NEVER, RelationalGraph

SECONDS_PER_DAY = 86_400.0

PAIR_FEATURES = (  # after one count per funnel stage
    "not_interested",
    "target_lately",
    "days_since_pair",
    "days_since_pair_target",
)
ITEM_FEATURES = (
    "item_target_lately",
    "item_engaged_lately",
    "item_target",
    "item_rebuy_share",
    "item_age_days",
)
USER_FEATURES = ("user_items", "user_target_lately", "user_target", "days_since_user")
# Days since the item's own row was listed (its table's time column; 0 for one listed after T, NaN
# where the item table has no time). Not an item count: an item shown as new in the ranker's fit
# (`InterestRanker.fit_features`) keeps it, so the trees can tell an item new to the catalogue
# from an old one nobody engaged with, which its counts cannot.
LISTING_FEATURES = ("item_listed_days",)


def feature_names(stages: list[str]) -> list[str]:
    """The columns of `Counts.features`, in order."""
    per_stage = [f"count_{stage}" for stage in stages]
    return [*per_stage, *PAIR_FEATURES, *ITEM_FEATURES, *USER_FEATURES, *LISTING_FEATURES]


def listing_columns(stages: list[str]) -> slice:
    """Where the `LISTING_FEATURES` lie among the `feature_names` columns."""
    end = len(feature_names(stages))
    return slice(end - len(LISTING_FEATURES), end)


def item_columns(stages: list[str]) -> slice:
    """Where the `ITEM_FEATURES` lie among the `feature_names` columns."""
    start = len(stages) + len(PAIR_FEATURES)
    return slice(start, start + len(ITEM_FEATURES))


# What an item without a single event before T has in the `ITEM_FEATURES` columns: no counts, no
# re-buy share, no age. Where a never-engaged item is new, its row looks like this.
_UNDEFINED_WHEN_COLD = ("item_rebuy_share", "item_age_days")
COLD_ITEM = np.array(
    [np.nan if name in _UNDEFINED_WHEN_COLD else 0.0 for name in ITEM_FEATURES], dtype=np.float32
)


@dataclass(frozen=True)
class FunnelLog:
    """Every `engaged` edge of the graph as numpy arrays. `stage` is -1 on events without a
    funnel stage; `negative` marks "not interested" feedback (never a positive); `item_listed`
    is each item row's own time (`NEVER` without one)."""

    user: np.ndarray
    item: np.ndarray
    time: np.ndarray
    stage: np.ndarray
    negative: np.ndarray
    item_listed: np.ndarray
    stages: list[str]
    num_users: int
    num_items: int

    @classmethod
    def of(cls, graph: RelationalGraph) -> FunnelLog:
        meta, data = graph.metadata, graph.data
        engaged = data[meta.engaged]
        return cls(
            user=engaged.edge_index[0].numpy(),
            item=engaged.edge_index[1].numpy(),
            time=engaged.edge_time.numpy(),
            stage=engaged.edge_stage.numpy(),
            negative=engaged.edge_negative.numpy(),
            item_listed=data[meta.item_type].time.numpy(),
            stages=list(meta.stages),
            num_users=int(data[meta.user_type].num_nodes),
            num_items=int(data[meta.item_type].num_nodes),
        )

    @property
    def target(self) -> int:
        return len(self.stages) - 1


def _log1p(values: np.ndarray) -> np.ndarray:
    return np.log1p(values.astype(np.float64))


class Counts:
    """The counting features of every (user, item) pair as of `as_of`, over `horizon` seconds."""

    def __init__(self, log: FunnelLog, as_of: int, horizon: int) -> None:
        self.log, self.as_of, self.horizon = log, as_of, horizon
        users, items = log.num_users, log.num_items
        past = log.time < as_of
        lately = past & (log.time >= as_of - horizon)
        positive = past & ~log.negative & (log.stage >= 0)
        target = positive & (log.stage == log.target)
        keys = log.user.astype(np.int64) * items + log.item
        self.pair_keys = np.unique(keys[positive | (past & log.negative)])
        pair_of = np.searchsorted(self.pair_keys, keys)
        pairs = len(self.pair_keys)

        def per_pair(mask: np.ndarray) -> np.ndarray:
            return np.bincount(pair_of[mask], minlength=pairs)

        stage_counts = [per_pair(positive & (log.stage == s)) for s in range(len(log.stages))]
        self.pair_target = stage_counts[-1]
        self.pair_columns = np.column_stack(
            [
                *(_log1p(c) for c in stage_counts),
                _log1p(per_pair(past & log.negative)),
                _log1p(per_pair(target & lately)),
                self._days_since(self._latest(pair_of, positive, pairs)),
                self._days_since(self._latest(pair_of, target, pairs)),
            ]
        )
        pair_item = self.pair_keys % items
        buyers = np.bincount(pair_item[self.pair_target >= 1], minlength=items)
        rebuyers = np.bincount(pair_item[self.pair_target >= 2], minlength=items)
        first = np.full(items, np.inf)
        np.minimum.at(first, log.item[positive], log.time[positive].astype(np.float64))
        self.item_eventless = ~np.isfinite(first)  # no positive event before T: new, or unwanted
        self.item_target_lately = np.bincount(log.item[target & lately], minlength=items)
        self.item_positive_lately = np.bincount(log.item[positive & lately], minlength=items)
        self.item_columns = np.column_stack(
            [
                _log1p(self.item_target_lately),
                _log1p(self.item_positive_lately),
                _log1p(np.bincount(log.item[target], minlength=items)),
                np.where(buyers > 0, rebuyers / np.maximum(buyers, 1), np.nan),
                self._days_since(np.where(np.isfinite(first), first, -np.inf)),
            ]
        )
        pair_user = self.pair_keys // items
        engaged_pairs = np.bincount(pair_of[positive], minlength=pairs) > 0
        self.user_columns = np.column_stack(
            [
                _log1p(np.bincount(pair_user[engaged_pairs], minlength=users)),
                _log1p(np.bincount(log.user[target & lately], minlength=users)),
                _log1p(np.bincount(log.user[target], minlength=users)),
                self._days_since(self._latest(log.user, positive, users)),
            ]
        )
        listed = log.item_listed.astype(np.float64)
        self.listing_columns = self._days_since(np.where(listed == NEVER, -np.inf, listed))[:, None]

    def _latest(self, index: np.ndarray, mask: np.ndarray, size: int) -> np.ndarray:
        """The latest event time per `index` among `mask`'s events; -inf where there is none."""
        latest = np.full(size, -np.inf)
        np.maximum.at(latest, index[mask], self.log.time[mask].astype(np.float64))
        return latest

    def _days_since(self, times: np.ndarray) -> np.ndarray:
        """log1p of the days from `times` to `as_of`; NaN where a time is -inf (none)."""
        days = (self.as_of - times) / SECONDS_PER_DAY
        return np.where(np.isfinite(times), np.log1p(np.maximum(days, 0.0)), np.nan)

    def history_pairs(self, users: Tensor) -> tuple[Tensor, Tensor]:
        """(row, item) of every pair a row of `users` has an event on before `as_of` (positive or
        "not interested"): the repeat candidates. Shapes: users [U] -> [P], [P]."""
        first_key = users.numpy().astype(np.int64) * self.log.num_items
        lower = np.searchsorted(self.pair_keys, first_key)
        counts = np.searchsorted(self.pair_keys, first_key + self.log.num_items) - lower
        offsets = np.cumsum(counts) - counts
        index = np.arange(counts.sum()) - np.repeat(offsets, counts) + np.repeat(lower, counts)
        rows = np.repeat(np.arange(len(users)), counts)
        return torch.from_numpy(rows), torch.from_numpy(self.pair_keys[index] % self.log.num_items)

    def popular(self, count: int) -> Tensor:
        """The `count` items with the most target-stage events lately (ties: lower id first)."""
        order = np.argsort(-self.item_target_lately, kind="stable")[:count]
        return torch.from_numpy(order[self.item_target_lately[order] > 0])

    def _pairs(self, users: Tensor, items: Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Each (users[j], items[j])'s index among `pair_keys` and whether it is there."""
        keys = users.numpy().astype(np.int64) * self.log.num_items + items.numpy()
        pair = np.searchsorted(self.pair_keys, keys).clip(max=max(len(self.pair_keys) - 1, 0))
        known = (self.pair_keys[pair] == keys) if len(self.pair_keys) else np.zeros(len(keys), bool)
        return pair, known

    def seen(self, users: Tensor, items: Tensor) -> np.ndarray:
        """Whether each (users[j], items[j]) has an event before `as_of`. Shapes: [P] -> [P]."""
        return self._pairs(users, items)[1]

    def features(self, users: Tensor, items: Tensor) -> np.ndarray:
        """The `feature_names` columns of each (users[j], items[j]). Shapes: [P], [P] -> [P, F]."""
        pair, known = self._pairs(users, items)
        item, user = items.numpy().astype(np.int64), users.numpy().astype(np.int64)
        pair_columns = np.zeros((len(pair), self.pair_columns.shape[1]))
        if len(self.pair_keys):
            pair_columns[known] = self.pair_columns[pair[known]]
        # days since a pair's event: none, not zero days, for a pair never engaged
        pair_columns[~known, -2:] = np.nan
        return np.column_stack(
            [
                pair_columns,
                self.item_columns[item],
                self.user_columns[user],
                self.listing_columns[item],
            ]
        ).astype(np.float32)
