"""Our trained models as the comparison sees them: each embedded, grown into a tree and ranked
by its second stage as of any time, with every embedding, tree, count table and ranker made once
and shared by the rows that need it (`compare.py` runs the comparison itself).

The ranker of a model is fitted on [t2 - horizon, t2) = [t1, t2), the window the model
early-stopped on and never trained on, from embeddings, a tree and counts as of t1; fitted on a
window the model trained on, it would learn to trust an embedding that had seen the answers.

Its signals: the embedding's inner product, the interest tokens a user and an item share, the
items' content next to the user's (the two forms of content kNN: the profile's cosine and item
kNN in content space, with the content-kNN baseline's code), and the paths through the rest of
the database from the user to the item (`ranker/paths.py`). Content and paths need no event on
the item, so they are what a new item is ranked by, and the ranker weighs them against the rest
on the fit window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import cached_property, partial
from typing import Any

import numpy as np
import torch
from torch import Tensor

from hier_pipeline.evaluation.ablations import (
    CONTENT_ONLY,
    NO_RANKER,
)
from hier_pipeline.evaluation.baselines.content_knn import ContentKNN
from hier_pipeline.evaluation.baselines.evaluate import Fitted
from hier_pipeline.evaluation.baselines.interactions import Interactions
from hier_pipeline.evaluation.baselines.recommender import Memo, Recommender
from hier_pipeline.evaluation.comparison import Comparison, HierarchyInputs
from hier_pipeline.evaluation.interest_recommender import (
    AsOf,
    EmbeddingRecommender,
    RankedRecommender,
    TokenRecommender,
    content_item_vectors,
)
from hier_pipeline.evaluation.ranker_fit import FitWindow, fit_ranker
from hier_pipeline.evaluation.ranker_setup import (
    CONTENT_HALF_LIFE_DAYS,
    CONTENT_KNN,
    CONTENT_NEIGHBOURS,
    CONTENT_POPULARITY,
    CONTENT_VIEW,
    EMBEDDING,
    FULL,
    PATH_HALF_LIFE_DAYS,
    PATHS,
    RANKER_VIEWS,
    TIE_BREAK,
    TOKEN_OVERLAP,
    TOKEN_SHARES,
    RankerSetup,
)
from hier_pipeline.evaluation.report import OURS
from hier_pipeline.evaluation.seeds import is_seed
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.sampler import SamplerConfig
from hier_pipeline.interests.events import FunnelEvents, funnel_events
from hier_pipeline.interests.hierarchy import HierarchyConfig, InterestHierarchy, build_hierarchy
from hier_pipeline.interests.shares import LevelShares, level_shares
from hier_pipeline.model.history import InteractionHistory
from hier_pipeline.model.infer import history_scores
from hier_pipeline.model.network import InterestModel
from hier_pipeline.ranker.counts import Counts, FunnelLog
from hier_pipeline.ranker.item_prior import ItemPrior, neighbours_mean
from hier_pipeline.ranker.paths import PathScores, schema_paths
from hier_pipeline.ranker.ranker import (
    InnerProduct,
    InterestRanker,
    Signal,
)
from hier_pipeline.ranking.window import EvaluationWindow

TOKENS = f"{OURS}_tokens"


class OurModels:
    """Our models as of t2: each embeds the window's users and every item once, and each tree
    the evaluation scores is grown on those item vectors, the items' content and the events
    before t2 (with the materialised tree's sizes), so the tree sees nothing after t2 either.
    Each model's ranker is fitted on the `horizon` before t2, from embeddings, tree and counts
    as of its start, made the same way."""

    def __init__(
        self,
        graph: RelationalGraph,
        content: Mapping[str, Mapping[str, Tensor]],
        comparison: Comparison,
        as_of: int,
        horizon: int,
        hierarchy: HierarchyInputs | None,
    ) -> None:
        self.graph, self.content, self.comparison, self.as_of = graph, content, comparison, as_of
        self.horizon, self.hierarchy = horizon, hierarchy
        # One sampler and context per time and sampling rule, shared by the models using them.
        self._embedders: dict[tuple[int, SamplerConfig], AsOf] = {}
        self._items: dict[tuple[str, int], Tensor] = {}
        self._vectors: dict[tuple[object, ...], tuple[Tensor, Tensor]] = {}
        self._trees: dict[tuple[str, int], InterestHierarchy] = {}
        self._events: dict[int, FunnelEvents] = {}
        self._counts: dict[int, Counts] = {}
        self._content: dict[int, dict[str, ContentKNN]] = {}
        self._content_views: dict[str, Tensor] = {}
        self._content_memo = Memo()  # the kNN form's neighbours: content alone, any time
        self._paths: dict[tuple[int, tuple[int, ...]], dict[str, PathScores]] = {}
        self._rankers: dict[tuple[str, RankerSetup], InterestRanker | None] = {}
        self._released: set[str] = set()  # models whose state `release` dropped
        # model -> how it is ranked: the ranker's fit, or why its own score stands in
        self.settings: dict[str, dict[str, object]] = {}

    def release(self, name: str) -> None:
        """Forget what was made for model `name` alone (its embeddings, trees, rankers, content
        view), and the samplers of a sampling no other model embeds with."""
        self._released.add(name)
        for cache in (self._vectors, self._items, self._trees, self._rankers):
            _forget(cache, name)
        self._content_views.pop(name, None)
        comparison = self.comparison
        kept = {
            comparison.model_sampling.get(model, comparison.sampling)
            for model in comparison.models
            if model not in self._released
        }
        for key in [key for key in self._embedders if key[1] not in kept]:
            del self._embedders[key]

    def vectors(self, name: str, users: Tensor, as_of: int) -> tuple[Tensor, Tensor]:
        """(`users`, every item) embedded by model `name` as of `as_of`, once each."""
        key = (name, as_of, tuple(users.tolist()))
        if key not in self._vectors:
            model = self.comparison.models[name]
            sampling = self.comparison.model_sampling.get(name, self.comparison.sampling)
            if (as_of, sampling) not in self._embedders:
                embedder = AsOf(model, self.graph, self.content, sampling, as_of)
                self._embedders[as_of, sampling] = embedder
            embed = self._embedders[as_of, sampling].for_model(model)
            if (name, as_of) not in self._items:
                items = torch.arange(int(self.graph.data[self.graph.metadata.item_type].num_nodes))
                self._items[name, as_of] = embed(self.graph.metadata.item_type, items)
            self._vectors[key] = (
                embed(self.graph.metadata.user_type, users),
                self._items[name, as_of],
            )
        return self._vectors[key]

    def tree(self, name: str, as_of: int) -> InterestHierarchy:
        assert self.hierarchy is not None, "no materialised tree to take the sizes from"
        if (name, as_of) not in self._trees:
            sizes = self.hierarchy.tree.primitives_per_level()
            items = self.vectors(name, torch.zeros(0, dtype=torch.long), as_of)[1]
            self._trees[name, as_of] = build_hierarchy(
                items,
                HierarchyConfig(sizes=sizes),
                self.content.get(self.graph.metadata.item_type),
                self.events(as_of),
            )
        return self._trees[name, as_of]

    def events(self, as_of: int) -> FunnelEvents:
        """The positive funnel events before `as_of`: the trees' coarse levels, the users' bags."""
        if as_of not in self._events:
            self._events[as_of] = funnel_events(self.graph, before=as_of)
        return self._events[as_of]

    def tokens(
        self, name: str, users: Tensor, as_of: int, item_shares: bool = True
    ) -> TokenRecommender:
        assert self.hierarchy is not None
        return TokenRecommender(
            users,
            self.vectors(name, users, as_of)[0],
            self.tree(name, as_of),
            self.hierarchy.tokens,
            self.events(as_of),
            as_of,
            item_shares,
        )

    @cached_property
    def interaction_history(self) -> InteractionHistory:
        return InteractionHistory.of(self.graph)

    @cached_property
    def log(self) -> FunnelLog:
        return FunnelLog.of(self.graph)

    def counts(self, as_of: int) -> Counts:
        if as_of not in self._counts:
            self._counts[as_of] = Counts(self.log, as_of, self.horizon)
        return self._counts[as_of]

    def content_view(self, name: str) -> Tensor:
        """Every item by model `name`'s content view alone, once. Shapes: -> [I, dim]."""
        if name not in self._content_views:
            model = self.comparison.models[name]
            self._content_views[name] = content_item_vectors(model, self.graph, self.content)
        return self._content_views[name]

    def content_scores(self, as_of: int) -> dict[str, ContentKNN]:
        """The content signals' scorers on the events before `as_of` (none without content)."""
        content = self.content.get(self.graph.metadata.item_type, {})
        if not content:
            return {}
        if as_of not in self._content:
            history = Interactions.from_graph(self.graph, as_of)
            forms = {
                name: ContentKNN(
                    content, CONTENT_HALF_LIFE_DAYS, neighbours, memo=self._content_memo
                )
                for name, neighbours in CONTENT_KNN.items()
            }
            for form in forms.values():
                form.fit(history)
            self._content[as_of] = forms
        return self._content[as_of]

    def signals(
        self, name: str, users: Tensor, as_of: int, kinds: tuple[str, ...]
    ) -> dict[str, Signal]:
        """The ranker's signals of model `name` for `users` as of `as_of`, of `kinds`."""
        signals: dict[str, Signal] = {}
        if EMBEDDING in kinds:
            signals[EMBEDDING] = InnerProduct(*self.vectors(name, users, as_of))
        if TOKEN_OVERLAP in kinds and self.hierarchy is not None:
            # The plain overlap: the trees read popularity from the counts, and with the items'
            # shares of their tokens here too, new items fell below the old ones of the user's
            # tokens in this signal's top list, the candidates it brings (measured:
            # docs/interests.md, 2026-12-07, session 33).
            overlap = self.tokens(name, users, as_of, item_shares=False)
            signals[TOKEN_OVERLAP] = lambda rows: overlap.score(users[rows])
        if TOKEN_SHARES in kinds and self.hierarchy is not None:
            shares = level_shares(
                self.events(as_of).of_users(users),
                len(users),
                self.tree(name, as_of),
                self.hierarchy.tokens,
                as_of,
            )
            # Every item of a token has the same share: among them, the signal's top list (its
            # candidates) takes the most engaged-with lately first (log1p of its positive events
            # in the last window, over the largest), by a margin far below any share's step.
            # Where many items have one share (most have 0), the ranker's histograms can still
            # tell them apart by it: popularity inside a share.
            lately = np.log1p(self.counts(as_of).item_positive_lately)
            tie_break = TIE_BREAK * torch.from_numpy(lately / max(lately.max(), 1e-12)).float()
            for level in range(shares.levels):
                signals[f"token_share_L{level}"] = partial(_share, shares, level, tie_break)
        if CONTENT_VIEW in kinds and isinstance(self.comparison.models[name], InterestModel):
            users_at = self.vectors(name, users, as_of)[0]
            signals[CONTENT_VIEW] = InnerProduct(users_at, self.content_view(name))
        for kind, form in self.content_scores(as_of).items():
            if kind in kinds:
                signals[kind] = lambda rows, form=form: form.score(users[rows])
        if CONTENT_POPULARITY in kinds and (prior := self.content_popularity(as_of)) is not None:
            signals[CONTENT_POPULARITY] = prior
        if PATHS in kinds:
            signals.update(self.paths(users, as_of))
        return signals

    def content_popularity(self, as_of: int) -> ItemPrior | None:
        """Each item's target-stage events lately (log1p) as its nearest items by content have
        them (`neighbours_mean` over the content-kNN signal's neighbours); None without content."""
        form = self.content_scores(as_of).get(CONTENT_NEIGHBOURS)
        if form is None or form.similarity is None:
            return None
        lately = torch.from_numpy(np.log1p(self.counts(as_of).item_target_lately))
        return ItemPrior(neighbours_mean(form.similarity, lately))

    def paths(self, users: Tensor, as_of: int) -> dict[str, PathScores]:
        """Every relational path's scores of `users` as of `as_of`, once."""
        key = (as_of, tuple(users.tolist()))
        if key not in self._paths:
            self._paths[key] = {
                path.name: PathScores(self.graph, path, users, as_of, PATH_HALF_LIFE_DAYS)
                for path in schema_paths(self.graph)
            }
        return self._paths[key]

    def ranker(self, name: str, setup: RankerSetup) -> InterestRanker | None:
        """Model `name`'s ranker of `setup`, fitted on [t2 - horizon, t2) from what was known at
        its start; None where the model's own score ranks instead (`ranker_fit.py`)."""
        if (name, setup) not in self._rankers:
            start, comparison = self.as_of - self.horizon, self.comparison
            window = FitWindow(self.graph, start, self.as_of, comparison.max_users, comparison.seed)
            fitted, setting = fit_ranker(
                window,
                setup.configured(replace(comparison.ranker, seed=comparison.seed)),
                self.counts(start),
                lambda users: self.signals(name, users, start, setup.signals),
                lambda users: partial(_own_rows, self.own_score(name, users, start), users),
                setup.behavioural,
            )
            if setup == FULL:
                self.settings[name] = {**setting, "fit_window": [start, self.as_of]}
            self._rankers[name, setup] = fitted
        return self._rankers[name, setup]

    def own_score(self, name: str, users: Tensor, as_of: int) -> EmbeddingRecommender:
        """Model `name`'s own score: inner product plus, where it has one, its history term."""
        model, pairs = self.comparison.models[name], None
        if model.history_bias is not None:
            pairs = history_scores(model, self.interaction_history, users, as_of)
        return EmbeddingRecommender(users, *self.vectors(name, users, as_of), pairs)

    def ranked(self, name: str, window: EvaluationWindow, setup: RankerSetup) -> Recommender:
        """Model `name`'s ranker's scores of the window's users as of t2; other items follow by
        inner product when the embedding is one of the ranker's signals. Without a ranker
        (too small a fit window), the model's own score."""
        ranker = self.ranker(name, setup)
        if ranker is None:
            return self.own_score(name, window.users, self.as_of)
        signals = self.signals(name, window.users, self.as_of, setup.signals)
        candidates = ranker.candidates(
            self.counts(self.as_of), window.users, signals, setup.behavioural
        )
        num_items = int(self.graph.data[self.graph.metadata.item_type].num_nodes)
        embedded = EMBEDDING in setup.signals
        vectors = self.vectors(name, window.users, self.as_of) if embedded else None
        return RankedRecommender(window.users, ranker.score(candidates), num_items, vectors)

    def fitted(self) -> dict[str, Fitted]:
        """A recommender builder per model of ours (every seed) and per view of the full one:
        its own score, its rankers of `RANKER_VIEWS`, its content-only view, its token retrieval."""
        comparison, as_of = self.comparison, self.as_of

        def by_ranker(name: str, setup: RankerSetup = FULL) -> Fitted:
            return lambda window: self.ranked(name, window, setup)

        def then_released(name: str) -> Fitted:
            def build(window: EvaluationWindow) -> Recommender:
                recommender = self.ranked(name, window, FULL)
                self.release(name)
                return recommender

            return build

        def content_only(window: EvaluationWindow) -> Recommender:
            users = self.vectors(OURS, window.users, as_of)[0]
            return EmbeddingRecommender(window.users, users, self.content_view(OURS))

        # A trained ablation is ranked once (the views and the cold users are of `hier` and its
        # seeds), so what was made for it alone goes once it is: kept, each one held gigabytes
        # more on Complete Journey (18.0 GB with `hier` alone, 22.6 with two trained ablations).
        fitted = {
            name: by_ranker(name) if name == OURS or is_seed(name) else then_released(name)
            for name in comparison.models
        }
        views: dict[str, Fitted] = {
            CONTENT_ONLY: content_only,
            NO_RANKER: lambda window: self.own_score(OURS, window.users, as_of),
            **{view: by_ranker(OURS, setup) for view, setup in RANKER_VIEWS.items()},
        }
        fitted.update({name: views[name] for name in comparison.views})
        if self.hierarchy is not None:
            fitted[TOKENS] = lambda window: self.tokens(OURS, window.users, as_of)
        return fitted


def _forget(cache: dict[Any, Any], name: str) -> None:
    """Delete the entries of `cache` made for model `name`: those whose key starts with it."""
    for key in [key for key in cache if key[0] == name]:
        del cache[key]


def _share(shares: LevelShares, level: int, tie_break: Tensor, rows: Tensor) -> Tensor:
    """A token-share signal: the level's shares plus the items' tie-break. Shapes: rows [R],
    tie_break [I] -> [R, I]."""
    return shares.score(level, rows) + tie_break


def _own_rows(own: EmbeddingRecommender, users: Tensor, rows: Tensor) -> Tensor:
    """The own score as a ranker `Signal` over rows of `users`. Shapes: rows [R] -> [R, I]."""
    return own.score(users[rows])
