"""What every baseline is: fit on past interactions, score every item for a batch of users; and the
one ranking function that turns those scores into top-k lists the same way for all of them."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions, PairMatrix
from hier_pipeline.evaluation.baselines.profiles import Profile
from hier_pipeline.ranking.metrics import UserItems

# The score of an item a model cannot score at all (unknown to a collaborative model, outside
# EASE's item subset): below every real score, and still ordered by the popularity tie-break.
UNSCORED = -1e30
_EXCLUDED = torch.iinfo(torch.int64).min
T = TypeVar("T")


class Recommender(Protocol):
    """Scores are finite (UNSCORED at worst), higher is better; ties are left to `recommend`."""

    def fit(self, history: Interactions) -> None: ...

    def score(self, users: Tensor) -> Tensor:
        """Shapes: users [U] node ids -> [U, num_items] float32."""
        ...


@dataclass(frozen=True)
class FitBudget:
    """How long a trained baseline optimises: `steps` steps, cut short after `seconds` of wall
    clock if given. Every trained baseline gets the same one (equal effort); only a steps-only
    budget is reproducible, since a time cap depends on the machine and its load."""

    steps: int = 1000
    seconds: float | None = None

    def steps_left(self, done: int = 0) -> Iterator[int]:
        """The steps after the `done` ones, up to `steps`; the time cap counts from this call."""
        started = time.perf_counter()
        for step in range(done, self.steps):
            if self.seconds is not None and time.perf_counter() - started >= self.seconds:
                return
            yield step


DEFAULT_BUDGET = FitBudget()


def plus_buy_again(
    scores: Tensor, own: PairMatrix, users: Tensor, weight: float, over: Tensor | None = None
) -> Tensor:
    """scores + weight x sd_u x c_ui: a trained model's scores with the user's own confidence c_ui
    added (buy again, as EASE's `repeat_weight` and ItemKNN's `self_weight`), in units of the
    spread sd_u of the user's scores over the items `over` (a mask; default every item), since a
    trained embedding's scale is free. Shapes: scores [U, I], users [U], over [I] -> [U, I]."""
    if not weight:
        return scores
    spread = (scores if over is None else scores[:, over]).std(dim=1, keepdim=True)
    return scores + weight * spread.nan_to_num() * own.dense(users)


class Memo:
    """What consecutive settings of a grid share (a profiled history, ItemKNN's similarities,
    EASE's Gram matrix), computed once: one value per slot, recomputed when the slot's key changes,
    so memory stays one value per slot however long the grid. Keys compare by identity for
    histories (`Interactions` has identity equality) and by value for numbers."""

    def __init__(self) -> None:
        self._slots: dict[str, tuple[tuple[Any, ...], Any]] = {}

    def get(
        self,
        slot: str,
        key: tuple[Any, ...],
        compute: Callable[[], T],
        enough: Callable[[T], bool] = lambda _: True,
    ) -> T:
        """The slot's value if its key is `key` and it is `enough`, else `compute()` stored."""
        held = self._slots.get(slot)
        if held is not None and held[0] == key and enough(held[1]):
            value: T = held[1]
            return value
        value = compute()
        self._slots[slot] = (key, value)
        return value

    def clear(self) -> None:
        """Drop every slot now. A slot's value can hold recommenders that hold this memo (a
        `Fits` keeps its steps' closures), a cycle only the garbage collector would free."""
        self._slots.clear()


@dataclass
class _Training:
    state: Any  # what one step needs: the model, its optimiser, the fit's generator
    steps: int
    torch_rng: Tensor  # torch's global generator (initialisation, dropout) after the last step


class Fits:
    """Trained fits that a longer fit of the same setting continues instead of starting over:
    successive halving fits each setting for 111 steps, the leading ones for 333, then 1000
    (`tuning.Halving`), and continuing saves 668 of a nine-fit grid's 3,000 steps. A continued
    fit keeps the model, optimiser and generator of the shorter one and restores torch's global
    generator, so it ends with the weights one uninterrupted fit of as many steps would have
    (the baselines' learning rates are constant). Keyed by the setting without its steps; keep
    one `Fits` per history (a `Memo` slot), so a new history drops the fits of the last."""

    def __init__(self) -> None:
        self._held: dict[tuple[Any, ...], _Training] = {}

    def train(
        self,
        key: tuple[Any, ...],
        budget: FitBudget,
        start: Callable[[], T],
        step: Callable[[T], None],
    ) -> T:
        """The state after `budget.steps` steps: `start()` (which seeds torch and builds the
        state), or the held fit of `key` if it ran no further, then `step(state)` per step."""
        held = self._held.pop(key, None)
        if held is None or held.steps > budget.steps:
            state, done = start(), 0
        else:
            state, done = held.state, held.steps
            torch.set_rng_state(held.torch_rng)
        for _ in budget.steps_left(done):
            step(state)
            done += 1
        self._held[key] = _Training(state, done, torch.get_rng_state())
        return state


class Profiled:
    """A recommender fit on its history reweighed by a `Profile` (`Interactions.with_profile`);
    `recommend`'s tie-break and seen items still come from the history as given."""

    def __init__(self, recommender: Recommender, profile: Profile, memo: Memo) -> None:
        self.recommender, self.profile, self.memo = recommender, profile, memo

    def fit(self, history: Interactions) -> None:
        key = (history, self.profile)
        self.recommender.fit(
            self.memo.get("profile", key, lambda: history.with_profile(self.profile))
        )

    def score(self, users: Tensor) -> Tensor:
        return self.recommender.score(users)


def recommend(
    recommender: Recommender,
    users: Tensor,
    k: int,
    popularity: Tensor,
    exclude: UserItems | None = None,
    chunk: int = 256,
) -> Tensor:
    """The k best items per user, scoring `chunk` users at a time (peak memory chunk x items).

    Equal scores are ordered by `popularity` (higher first), then by item id: many baselines tie
    often (no neighbour, no history, cold items) and an arbitrary order would be noise.
    Excluded items are never returned; where fewer than k remain (k larger than the catalogue,
    or most of it excluded) the tail is -1.

    Shapes: users [U], popularity [I], exclude U rows -> [U, k] long, best first.
    """
    num_items = len(popularity)
    order = torch.sort(-popularity, stable=True).indices  # the tie order: popular first, then id
    tie_rank = torch.empty(num_items, dtype=torch.long)
    tie_rank[order] = torch.arange(num_items - 1, -1, -1)
    depth = min(k, num_items)
    parts = [torch.empty(0, k, dtype=torch.long)]
    for start in range(0, len(users), chunk):
        end = min(start + chunk, len(users))
        scores = recommender.score(users[start:end]).float()
        if torch.isnan(scores).any():
            raise ValueError(f"{type(recommender).__name__} returned NaN scores")
        if exclude is not None:
            row, item = exclude.rows(start, end)
            scores[row, item] = -math.inf  # below UNSCORED: never returned
        ranked = _top(scores, order, tie_rank, depth)
        parts.append(torch.nn.functional.pad(ranked, (0, k - depth), value=-1))
    return torch.cat(parts)


def _top(scores: Tensor, order: Tensor, tie_rank: Tensor, depth: int) -> Tensor:
    """The `depth` best items of each row by (score, tie_rank), -1 for excluded (-inf) ones.

    A float `topk` finds each row's depth-th score, the boundary. The items above it are among
    the topk's and need only their order. Where exactly `depth` items reach it, the boundary's
    own are too; elsewhere (ties across the boundary: a baseline that scores most items 0) the
    boundary's first items in the tie order fill the rest, read off the row in that order
    (`order`: the items by tie_rank, highest first). On Complete Journey's content-kNN rows this
    takes 0.09 s per 256 users where an exact integer `topk` over the row took 0.7 s.

    Shapes: scores [U, I] float32, order [I], tie_rank [I] -> [U, depth] long.
    """
    values, indices = scores.topk(depth, dim=1)
    boundary = values[:, -1:]
    reached = (scores >= boundary).sum(dim=1, keepdim=True)
    # the topk entries sure to be in the answer: above the boundary, or on it with no tie across
    sure = (values > boundary) | ((reached == depth) & (boundary > -math.inf))
    key = (_ordered(values) * (1 << 32) + tie_rank[indices]).masked_fill(~sure, _EXCLUDED)
    ranked = indices.gather(1, key.argsort(dim=1, descending=True, stable=True))
    count = sure.sum(dim=1)
    ranked[torch.arange(depth) >= count.unsqueeze(1)] = -1
    # the boundary's items in tie order after the sure ones (none at -inf: excluded): the first
    # items of the order settle most rows (a boundary at 0 holds most items), the rest read all
    rows = ((count < depth) & (boundary[:, 0] > -math.inf)).nonzero().flatten()
    for columns in (order[: 4 * depth], order):
        tied = scores[rows.unsqueeze(1), columns] == boundary[rows]
        place = tied.cumsum(dim=1, dtype=torch.int32) + count[rows].unsqueeze(1).int() - 1
        settled = place[:, -1] >= depth - 1  # as many as needed among these columns
        if len(columns) == len(order):
            settled = torch.ones_like(settled)
        row, position = (tied & (place < depth) & settled.unsqueeze(1)).nonzero(as_tuple=True)
        ranked[rows[row], place[row, position].long()] = columns[position]
        rows = rows[~settled]
    return ranked


def _ordered(scores: Tensor) -> Tensor:
    """An int64 with the order of the float32 scores: shifted up 32 bits and plus a tie rank, a
    lexicographic (score, tie) key in one integer, so one sort orders a row's top exactly."""
    bits = scores.float().contiguous().view(torch.int32).long()
    return torch.where(bits >= 0, bits, -(bits & 0x7FFFFFFF))
