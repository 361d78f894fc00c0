"""The second stage: one learned score over repeat and explore candidates, the gate between them.

Why. The model has two signals on different scales: the user's own history (how often and how
recently they bought the item, whether anyone re-buys it) and the embedding's inner product
(interests beyond that history). Added together (the history term of training) "seen before"
wins for every user alike. Here a gradient-boosted classifier, fitted on the last window before
serving, estimates P(target-stage event on the item in the next window) for both kinds of
candidate from the same features; its trees split on the user's own figures (how many items, how
active lately) too, so how far one user's ranking follows history or explores is learned per
user: the gate of ReCANet / RepeatNet, fitted rather than assumed.

Candidates per user: every item of their history, the `popular_candidates` items with the most
target events lately, and the top `signal_candidates` of each signal: a dense score of every item
for a user, e.g. the embedding's inner product or the interest tokens the user and the item share;
with `new_item_candidates`, also each non-behavioural signal's top items among those without a
positive event (new items lose most places in a list they share with warm ones).
Each signal adds two features: its score, and the candidate's rank in its top list (NaN below it).

New items. The fit window rarely holds a purchase of an item without earlier events, so trees
fitted on it learn that such an item is never bought. Two steps teach them otherwise (DropoutNet
at the second stage): signals learned from events (`behavioural`, e.g. the embedding) are NaN on
an item without a positive event, where they say nothing reliable, so such an item is ranked by
its content signals and the user's figures; and in the fit a `cold_item_rate` share of items is
shown, to the users who had not met them, as if new (`fit_features`), labels kept. Those are old
items in disguise, and a catalogue's new items are bought at another rate than old ones nobody
engaged with; where the item table has a time, each item's listing age is a feature, kept on the
disguised ones, so the fit window's own newly listed items teach that rate. Items listed only after
the fit window are no candidates there: nobody could engage with them in it, and as negatives
they taught that new items are not bought (measured: docs/evaluation.md).

One score from several fits. The trees' size is chosen on held-out users (`leaf_grid`, k folds),
which fits the chosen size once per fold; the score is the mean probability of those k fits and
the fit on the whole window. Why: one fit's early stopping and size choice move with small
changes of its input (a feature more, another seed), by as much as the differences measured
between rankers; the mean of fits on different users moves less, and costs no extra fit.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier
from torch import Tensor

from hier_pipeline.ranker.counts import (
    COLD_ITEM,
    Counts,
    feature_names,
    item_columns,
    listing_columns,
)
from hier_pipeline.ranker.selection import candidate_ap, user_folds
from hier_pipeline.ranking.metrics import PairScores, UserItems

CHUNK = 256  # ranked users per dense signal block


class Signal(Protocol):
    """A score of every item for some of the ranked users. Shapes: rows [R] -> [R, I]."""

    def __call__(self, rows: Tensor) -> Tensor: ...


@dataclass(frozen=True)
class InnerProduct:
    """The embedding signal. Shapes: users [U, d] (the ranked users), items [I, d]."""

    users: Tensor
    items: Tensor

    def __call__(self, rows: Tensor) -> Tensor:
        return self.users[rows] @ self.items.T


class TooFewLabels(ValueError):
    """The fit window holds too few relevant candidates for a classifier to learn from."""


@dataclass(frozen=True)
class RankerConfig:
    signal_candidates: int = 100  # per signal
    popular_candidates: int = 100
    # Per signal that is not behavioural, its top items among those without a positive event as
    # well (0: none): new items compete with warm ones in every top list, and lose most places
    # there before the ranker sees them (measured: a quarter of the synthetic world's new
    # purchases are in no top list). Not the default until measured (docs/evaluation.md).
    new_item_candidates: int = 0
    # Fewer relevant candidates in the fit window than this: no fit (`TooFewLabels`). Measured
    # (docs/evaluation.md, small databases): windows of 18, 74 and 84 target-stage positives
    # fitted a ranker that beat the model's own score and a ranker on shallower stages' labels
    # on the next window (two synthetic worlds, a Complete Journey sample); below the smallest
    # of them nothing was measured.
    min_relevant: int = 15
    max_iterations: int = 300  # boosting rounds; early stopping on held-out pairs ends sooner
    learning_rate: float = 0.05
    # The trees' sizes (max_leaf_nodes) to choose from, by MAP@`selection_k` on held-out users of
    # the fit window (`selection.py`, `selection_folds`-fold); one size: no choice, one fit.
    leaf_grid: tuple[int, ...] = (3, 7, 15, 31)
    selection_folds: int = 3
    selection_k: int = 10
    l2_regularization: float = 1.0
    # The share of items shown as new in the fit (module doc), as the model's training does.
    cold_item_rate: float = 0.2
    # Whether the trees read how long ago each item was listed (`counts.LISTING_FEATURES`), and
    # the fit leaves out the items listed after its window (`candidates`' `listed_by`).
    listing: bool = True
    seed: int = 0


@dataclass(frozen=True)
class Candidates:
    """The pairs a ranker scores. Shapes: rows, items [P] (rows ascending, indexing the ranked
    users); features [P, F]; seen [P], whether the user had an event on the item. Among the
    features, `items_at` holds the item's counts and `blind_at` the behavioural signals' columns
    (NaN on an item without events, module doc)."""

    rows: Tensor
    items: Tensor
    features: np.ndarray
    seen: np.ndarray
    items_at: slice
    blind_at: np.ndarray  # int64 column indices


class InterestRanker:
    """Fit on one window (`fit`), then score candidates at any later time (`score`)."""

    def __init__(self, config: RankerConfig = RankerConfig()) -> None:
        self.config = config
        # the fit on the whole window, then the selection's fits of the chosen size (module doc)
        self.classifiers: list[HistGradientBoostingClassifier] = []
        self.fit_relevant = 0  # relevant candidates of the fit window
        self.leaves = config.leaf_grid[-1]  # the trees' size the fit chose
        self.held_out_map: dict[int, float] = {}  # size -> its mean held-out MAP@k
        # the fit window's users' folds, and the folds whose fits of the chosen size are kept
        self.fold_of_user = np.zeros(0, dtype=np.int64)
        self.held_out_folds: list[int] = []

    @staticmethod
    def feature_names(stages: list[str], signals: Mapping[str, Signal]) -> list[str]:
        """The columns of `Candidates.features` for these stages and signals."""
        per_signal = [f"{name}_{part}" for name in signals for part in ("score", "rank")]
        return [*feature_names(stages), *per_signal]

    def candidates(
        self,
        counts: Counts,
        users: Tensor,
        signals: Mapping[str, Signal],
        behavioural: Collection[str] = (),
        listed_by: int | None = None,
    ) -> Candidates:
        """Each of `users`' candidates as of `counts.as_of` with their features (module doc);
        the `behavioural` among the `signals` are NaN on items without a positive event; an item
        listed (`FunnelLog.item_listed`) at `listed_by` or later is none (with `listing`).

        Users go `CHUNK` at a time: each signal's dense scores of a block give both its top list
        and its feature columns, so no signal is computed twice."""
        history_rows, history_items = counts.history_pairs(users)
        popular = counts.popular(self.config.popular_candidates)
        depth = min(self.config.signal_candidates, counts.log.num_items)
        unlisted = torch.zeros(counts.log.num_items, dtype=torch.bool)
        if listed_by is not None and self.config.listing:
            unlisted = torch.from_numpy(counts.log.item_listed >= listed_by)
        eventless = torch.from_numpy(counts.item_eventless)
        fresh = min(self.config.new_item_candidates, int(eventless.sum()))
        new_item_lists = {n: fresh for n in signals if n not in behavioural and fresh}
        none = torch.zeros(0, dtype=torch.long)
        blocks = [(none, none, np.zeros((0, 2 * len(signals))))]  # with no user, no candidate
        for start in range(0, len(users), CHUNK):
            end = min(start + CHUNK, len(users))
            lo, hi = torch.searchsorted(history_rows, torch.tensor([start, end])).tolist()
            own = (history_rows[lo:hi] - start, history_items[lo:hi])
            block = torch.arange(start, end)
            tops = _top_lists(signals, block, depth, new_item_lists, eventless, unlisted)
            blocks.append(_block(block, own, popular, tops, unlisted))
        rows, items = torch.cat([b[0] for b in blocks]), torch.cat([b[1] for b in blocks])
        columns = [counts.features(users[rows], items), np.concatenate([b[2] for b in blocks])]
        features = np.column_stack(columns).astype(np.float32)
        first_signal = len(feature_names(counts.log.stages))
        blind_at = np.array(
            [
                first_signal + 2 * position + part
                for position, name in enumerate(signals)
                if name in behavioural
                for part in (0, 1)
            ],
            dtype=np.int64,
        )
        eventless = counts.item_eventless[items.numpy()]
        features[np.ix_(eventless, blind_at)] = np.nan
        if not self.config.listing:
            features[:, listing_columns(counts.log.stages)] = np.nan
        seen = counts.seen(users[rows], items)
        return Candidates(rows, items, features, seen, item_columns(counts.log.stages), blind_at)

    def fit(
        self, candidates: Candidates, relevant: UserItems, judged: UserItems | None = None
    ) -> None:
        """Learn P(relevant) of the candidates; `relevant` rows are the candidates' rows. The
        trees' size is chosen on held-out users' `judged` items (default: `relevant`): the target
        stage's, where `relevant` has shallower stages stand in for a sparse one."""
        labels = relevant.has(candidates.rows, candidates.items).numpy()
        config = self.config
        if labels.sum() < config.min_relevant or labels.all():
            raise TooFewLabels(
                f"the ranker's fit window has {int(labels.sum())} relevant of {len(labels)} "
                f"candidates: it needs at least {config.min_relevant} and some irrelevant ones"
            )
        self.fit_relevant = int(labels.sum())
        features = self.fit_features(candidates)
        self.leaves, held_out_fits = self._choose_leaves(
            candidates, features, labels, relevant if judged is None else judged
        )
        whole = _fitted(self._classifier(self.leaves), features, labels)
        self.classifiers = [whole, *held_out_fits]

    def _classifier(self, leaves: int) -> HistGradientBoostingClassifier:
        config = self.config
        return HistGradientBoostingClassifier(
            learning_rate=config.learning_rate,
            max_iter=config.max_iterations,
            max_leaf_nodes=leaves,
            l2_regularization=config.l2_regularization,
            early_stopping=True,
            validation_fraction=0.1,
            n_iter_no_change=20,
            random_state=config.seed,
        )

    def _choose_leaves(
        self,
        candidates: Candidates,
        features: np.ndarray,
        labels: np.ndarray,
        judged: UserItems,
    ) -> tuple[int, list[HistGradientBoostingClassifier]]:
        """The `leaf_grid` size with the best mean MAP@k of `judged` over held-out users
        (`selection.py`): fitted on the other folds' `features` (items shown as new included),
        scored on the held-out fold's candidates as serving sees them. Ties: the smaller trees.
        Returns the size and its fits, one per fold of `held_out_folds`."""
        config = self.config
        if len(config.leaf_grid) == 1:
            return config.leaf_grid[0], []
        self.fold_of_user = user_folds(judged.num_users, config.selection_folds, config.seed)
        fold = self.fold_of_user[candidates.rows.numpy()]
        rows, items = candidates.rows.numpy(), candidates.items.numpy()
        held_out: dict[int, list[float]] = {leaves: [] for leaves in config.leaf_grid}
        fits: dict[int, list[HistGradientBoostingClassifier]] = {s: [] for s in config.leaf_grid}
        self.held_out_folds = []
        for k in range(config.selection_folds):
            fit, held = fold != k, fold == k
            if not labels[fit].any() or labels[fit].all():
                continue
            self.held_out_folds.append(k)
            users = np.flatnonzero(self.fold_of_user == k)
            for leaves in config.leaf_grid:
                classifier = _fitted(self._classifier(leaves), features[fit], labels[fit])
                scores = classifier.predict_proba(candidates.features[held])[:, 1]
                figures = candidate_ap(
                    rows[held], items[held], scores, judged, users, config.selection_k
                )
                held_out[leaves].append(float(figures.mean()) if len(figures) else float("nan"))
                fits[leaves].append(classifier)
        self.held_out_map = {
            leaves: float(np.nanmean(figures)) if figures else float("nan")
            for leaves, figures in held_out.items()
        }
        best = max(self.held_out_map.items(), key=lambda pair: np.nan_to_num(pair[1], nan=-1.0))
        return best[0], fits[best[0]]

    def cross_fitted(self, candidates: Candidates) -> np.ndarray:
        """Each of the fit's candidates scored by the chosen size's fit that held its user out
        (NaN where no fit did: one size, no folds): what the ranker does for users it has not
        seen, to hold other rankings of the same users against. Shapes: -> [P]."""
        scores = np.full(len(candidates.rows), np.nan)
        fold = self.fold_of_user[candidates.rows.numpy()] if len(self.fold_of_user) else None
        for k, classifier in zip(self.held_out_folds, self.classifiers[1:], strict=True):
            assert fold is not None
            held = fold == k
            scores[held] = classifier.predict_proba(candidates.features[held])[:, 1]
        return scores

    def fit_features(self, candidates: Candidates) -> np.ndarray:
        """What the fit sees: the features with a `cold_item_rate` share of items, drawn by seed,
        shown as new to the users who had not met them: no counts, behavioural signals blind,
        their listing age kept (module doc)."""
        features = candidates.features.copy()
        num_items = int(candidates.items.max()) + 1 if len(candidates.items) else 0
        rng = np.random.default_rng(self.config.seed)
        drawn = rng.random(num_items) < self.config.cold_item_rate
        rows = np.flatnonzero(drawn[candidates.items.numpy()] & ~candidates.seen)
        features[rows, candidates.items_at] = COLD_ITEM
        features[np.ix_(rows, candidates.blind_at)] = np.nan
        return features

    def score(self, candidates: Candidates) -> PairScores:
        """P(relevant) of every candidate. Shapes: -> PairScores over the candidates' rows."""
        if not self.classifiers:
            raise RuntimeError("fit the ranker first")
        if len(candidates.rows) == 0:  # nothing to rank (no users): sklearn refuses empty input
            return PairScores(candidates.rows, candidates.items, torch.zeros(0))
        probability = np.mean(
            [fit.predict_proba(candidates.features)[:, 1] for fit in self.classifiers], axis=0
        )
        return PairScores(candidates.rows, candidates.items, torch.from_numpy(probability).float())


def _fitted(
    classifier: HistGradientBoostingClassifier, features: np.ndarray, labels: np.ndarray
) -> HistGradientBoostingClassifier:
    """`classifier` fitted, with columns undefined (NaN) on every pair set to 0: the trees cannot
    split on them either way, and scikit-learn's binning fails on a column without a value
    (e.g. the re-buy share where nobody bought anything twice)."""
    undefined = np.isnan(features).all(axis=0)
    if undefined.any():
        features = features.copy()
        features[:, undefined] = 0.0
    return classifier.fit(features, labels)


@dataclass(frozen=True)
class _TopLists:
    """A block's dense signal scores, each signal's top list (its `rank` feature) and the items
    each signal adds as candidates (its top list, and its top new items where asked).
    Shapes: dense [R, I], tops [R, depth], added [R, *] per signal."""

    dense: dict[str, Tensor]
    tops: dict[str, Tensor]
    added: list[Tensor]


def _top_lists(
    signals: Mapping[str, Signal],
    rows: Tensor,
    depth: int,
    new_item_lists: Mapping[str, int],
    eventless: Tensor,
    unlisted: Tensor,
) -> _TopLists:
    """Each signal's scores of the block `rows`, its top `depth` items, and, for the signals of
    `new_item_lists`, that many of its top items among the `eventless` ones [I] as well; the
    `unlisted` items [I] in no list."""
    dense = {name: signal(rows) for name, signal in signals.items()}
    listed = {
        name: scores.masked_fill(unlisted, -torch.inf) if unlisted.any() else scores
        for name, scores in dense.items()
    }
    tops = {name: scores.topk(depth, dim=1).indices for name, scores in listed.items()}
    added = list(tops.values())
    for name, count in new_item_lists.items():
        fresh = listed[name].masked_fill(~eventless, -torch.inf).topk(count, dim=1).indices
        added.append(fresh)
    return _TopLists(dense, tops, added)


def _block(
    rows: Tensor,
    own: tuple[Tensor, Tensor],
    popular: Tensor,
    lists: _TopLists,
    unlisted: Tensor,
) -> tuple[Tensor, Tensor, np.ndarray]:
    """The candidates of a block of ranked users (`rows`), none of them `unlisted` [I], and their
    signal columns: per signal its score and log1p of the candidate's rank in its top list (NaN
    below it).

    `own` holds the block's history pairs (row within the block, item). Shapes: rows [R] ->
    rows [P] ascending (indexing all ranked users), items [P], columns [P, 2 * signals]."""
    dense, tops = lists.dense, lists.tops
    local = torch.arange(len(rows))
    block_rows = torch.cat(
        [
            own[0],
            local.repeat_interleave(len(popular)),
            *(local.repeat_interleave(added.shape[1]) for added in lists.added),
        ]
    )
    block_items = torch.cat(
        [own[1], popular.repeat(len(rows)), *(added.flatten() for added in lists.added)]
    )
    num_items = len(unlisted)
    keys = torch.unique(block_rows * num_items + block_items)
    keys = keys[~unlisted[keys % num_items]]
    block_rows, items = keys // num_items, keys % num_items
    columns = []
    for name, scores in dense.items():
        columns.append(scores[block_rows, items].double().numpy())
        hit = tops[name][block_rows] == items.unsqueeze(1)
        rank = hit.double().argmax(dim=1).double().numpy()
        columns.append(np.where(hit.any(dim=1).numpy(), np.log1p(rank), np.nan))
    stacked = np.column_stack(columns) if columns else np.zeros((len(keys), 0))
    return rows[block_rows], items, stacked
