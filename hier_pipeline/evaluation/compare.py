"""Our model, its ablations and every baseline on one window: the numbers of the evaluation report.

Protocol. Our model is trained on events before t1 and early-stopped on [t1, t2), so the final
comparison is on the window after it, [t2, end), end = the last event + 1:
  - baselines run `evaluate_baselines` on the split (t2, end): tuned on a window as long as the
    evaluated one just before t2, then refit on everything before t2;
  - our models are embedded as of t2 (inductively, from neighbourhoods before t2, with no
    retraining) and ranked by their own score (inner product plus, where the model has it, the
    personal-history term of the user's events before t2) on the same window: same warm users,
    same relevant items, the same rule for already-bought items, the same popularity tie-break;
  - cold items are those without an interaction before t2: nobody, model or baseline, has seen
    a single one of theirs. (Items first engaged in [t1, t2) are new to our model's training but
    not to the baselines, which refit on them: counting them as cold would favour the baselines
    and hide whether inductive embedding works.)
  - `hier_content_only` ranks by the inner product of the users' graph view with the items'
    content view (no history term: it isolates where content alone places an item);
  - token retrieval (`hier_tokens`) ranks items by the Bag-of-Meaning tokens they share with the
    user, bags assigned from the same t2 vectors with the materialised tree (grown on the
    embeddings as of the end of the data: it saw the items' later neighbourhoods, not the users');
  - from every model's final ranking of the same users: 95% bootstrap intervals, ours minus each
    baseline with a paired interval (`uncertainty.py`), and recall on repeat vs explore positives
    with the share of each top 50 taken from the user's history (`segments.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch
from torch import Tensor

from hier_pipeline.evaluation.ablations import CONTENT_ONLY
from hier_pipeline.evaluation.baselines.evaluate import (
    BASELINES,
    FIT_BUDGET,
    Fitted,
    evaluate_baselines,
    tuned,
)
from hier_pipeline.evaluation.baselines.recommender import FitBudget, Recommender
from hier_pipeline.evaluation.cold_users import POPULARITY, cold_user_rankings
from hier_pipeline.evaluation.interest_recommender import (
    AsOf,
    EmbeddingRecommender,
    TokenRecommender,
    content_item_vectors,
)
from hier_pipeline.evaluation.report import HISTORY_SHARE, OURS, EvaluationReport, HierarchyScores
from hier_pipeline.evaluation.seeds import is_seed, pool_seeds
from hier_pipeline.evaluation.segments import (
    SEGMENT_K,
    engaged_before,
    history_share,
    segment_recall,
    split_relevant,
)
from hier_pipeline.evaluation.truth import level_scores
from hier_pipeline.evaluation.uncertainty import (
    intervals,
    per_user_figures,
    user_segments,
    versus,
)
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.split import TemporalSplit
from hier_pipeline.interests.artifact import HierarchyArtifact, TokensArtifact
from hier_pipeline.interests.events import FunnelEvents, funnel_events
from hier_pipeline.interests.hierarchy import HierarchyConfig, InterestHierarchy, build_hierarchy
from hier_pipeline.interests.quality import level_agreement
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.model.factory import GraphEncoder
from hier_pipeline.model.history import InteractionHistory
from hier_pipeline.model.infer import history_scores
from hier_pipeline.ranking.window import EvaluationWindow

TOKENS = f"{OURS}_tokens"


@dataclass(frozen=True)
class HierarchyInputs:
    """The materialised interest tree, the token settings its bags were made with, its stability
    (per level agreement with a tree from another seed) and the items' known taxonomy, if any.

    Shapes: truth [items, truth levels] or None.
    """

    tree: InterestHierarchy
    tokens: TokenConfig
    stability: list[dict[str, float]]
    truth: np.ndarray | None = None


@dataclass(frozen=True)
class Comparison:
    """What to compare, besides the data: our trained models by name (`hier` and any trained
    ablations), the fanouts they embed with, our model's training history."""

    models: Mapping[str, GraphEncoder]
    fanouts: tuple[int, ...]
    history: list[dict[str, float]] = field(default_factory=list)
    content_only: bool = True  # add `hier_content_only`
    baselines: Sequence[str] = tuple(BASELINES)
    max_users: int = 5000  # evaluated users: a fixed random subset beyond it
    seed: int = 0
    budget: FitBudget = FIT_BUDGET


def hierarchy_inputs(
    hierarchy: HierarchyArtifact, tokens: TokensArtifact, truth: np.ndarray | None
) -> HierarchyInputs:
    """From the interests stage's outputs. The bags' token count per level is read from the
    tokens; their softmax temperature is not stored, so retrieval weighs at the default one."""
    bags = next(iter(tokens.load().bags.values()))
    return HierarchyInputs(
        hierarchy.load(), TokenConfig(top_k=bags.tokens.shape[2]), hierarchy.stability, truth
    )


def data_end(graph: RelationalGraph) -> int:
    """One second after the last funnel event: the end of the evaluated window."""
    return int(graph.data[graph.metadata.engaged].edge_time.max()) + 1


def evaluate_models(
    dataset: str,
    graph: RelationalGraph,
    content: Mapping[str, Mapping[str, Tensor]],
    split: TemporalSplit,
    comparison: Comparison,
    hierarchy: HierarchyInputs | None = None,
    progress: Callable[[str], None] | None = None,
) -> EvaluationReport:
    """Score everything on [t2, end) as the module doc describes. `split` is the training split."""
    if OURS not in comparison.models:
        raise ValueError(f"the models to compare must include '{OURS}'")
    end = data_end(graph)
    ours = _Ours(graph, content, comparison, split.t2, hierarchy)
    result = evaluate_baselines(
        graph,
        content,
        TemporalSplit(split.t2, end),
        comparison.baselines,
        max_users=comparison.max_users,
        seed=comparison.seed,
        budget=comparison.budget,
        progress=progress,
        fitted=ours.fitted(),
    )
    window, rankings = result.window, result.rankings
    seen = engaged_before(graph, window.users, split.t2)
    positives = split_relevant(window.relevant, seen)
    for name, topk in rankings.items():
        result.metrics[name][HISTORY_SHARE] = history_share(topk, seen)
    segments = {
        segment: {
            name: {f"recall@{SEGMENT_K}": segment_recall(topk, {segment: items})[segment]}
            for name, topk in rankings.items()
        }
        for segment, items in positives.items()
    }
    figures = per_user_figures(rankings, window.relevant)
    seeds = [OURS, *(name for name in rankings if is_seed(name))]
    fitted = ours.fitted()
    cold, cold_ranked = cold_user_rankings(
        graph,
        split.t2,
        end,
        {name: fitted[name] for name in seeds},
        tuned(
            POPULARITY,
            result.settings.get(POPULARITY, BASELINES[POPULARITY].grid[0]),
            graph,
            content,
        ),
        SEGMENT_K,
        comparison.max_users,
        comparison.seed,
    )
    cold_figures = per_user_figures(cold_ranked, cold.relevant)
    cold_metrics = {n: {m: v.mean().item() for m, v in f.items()} for n, f in cold_figures.items()}
    pool_seeds(seeds, cold_metrics, cold_figures)
    spread = pool_seeds(seeds, result.metrics, figures, *segments.values())
    baselines = [name for name in comparison.baselines if name in rankings]
    segments.update(user_segments(result.metrics, figures, cold_figures, baselines))
    scores = None
    if hierarchy is not None:
        tree = ours.tree(OURS, window)
        scores = HierarchyScores(
            level_scores(tree, hierarchy.truth),
            result.metrics[TOKENS]["recall@50"],
            result.metrics[OURS]["recall@50"],
            _mean([level["ari"] for level in hierarchy.stability]),
            training_seed_ari=_seed_agreement(tree, ours.tree(seeds[1], window))
            if len(seeds) > 1
            else None,
        )
    return EvaluationReport(
        dataset=dataset,
        target_stage=graph.metadata.stages[-1],
        t1=split.t1,
        t2=split.t2,
        end=end,
        models=result.metrics,
        settings=result.settings,
        seconds={n: v for n, v in result.seconds.items() if not is_seed(n)},
        hierarchy=scores,
        history=comparison.history,
        repeat_rate=result.repeat_rate,
        exclude_seen=result.exclude_seen,
        users=result.num_users,
        cold_users=result.num_cold_users,
        intervals=intervals(figures, comparison.seed),
        versus=versus(figures, OURS, baselines, comparison.seed),
        segments=segments,
        seeds=len(seeds),
        seed_sd=spread,
        cold_users_evaluated=len(cold.users),
    )


def _seed_agreement(tree: InterestHierarchy, other: InterestHierarchy) -> list[float]:
    """ARI per level between the trees of two training seeds: whether a token survives a
    retrain, not only another k-means seed."""
    return [
        level_agreement(tree.members[:, level], other.members[:, level])["ari"]
        for level in range(min(tree.levels, other.levels))
    ]


class _Ours:
    """Our models as of t2: each embeds the window's users and every item once, and each tree
    the evaluation scores is grown on those item vectors, the items' content and the events
    before t2 (with the materialised tree's sizes), so the tree sees nothing after t2 either."""

    def __init__(
        self,
        graph: RelationalGraph,
        content: Mapping[str, Mapping[str, Tensor]],
        comparison: Comparison,
        as_of: int,
        hierarchy: HierarchyInputs | None,
    ) -> None:
        self.graph, self.content, self.comparison, self.as_of = graph, content, comparison, as_of
        self.hierarchy = hierarchy
        self._embedders: dict[str, AsOf] = {}
        self._items: dict[str, Tensor] = {}
        self._vectors: dict[tuple[object, ...], tuple[Tensor, Tensor]] = {}
        self._trees: dict[str, InterestHierarchy] = {}

    def embedder(self, name: str) -> AsOf:
        if name not in self._embedders:
            model, fanouts = self.comparison.models[name], self.comparison.fanouts
            self._embedders[name] = AsOf(model, self.graph, self.content, fanouts, self.as_of)
        return self._embedders[name]

    def vectors(self, name: str, window: EvaluationWindow) -> tuple[Tensor, Tensor]:
        """(the window's users, every item), embedded once per model and window."""
        key = (name, window.start, window.end, tuple(window.users.tolist()))
        if key not in self._vectors:
            embed, meta = self.embedder(name), self.graph.metadata
            if name not in self._items:
                items = torch.arange(int(self.graph.data[meta.item_type].num_nodes))
                self._items[name] = embed(meta.item_type, items)
            self._vectors[key] = embed(meta.user_type, window.users), self._items[name]
        return self._vectors[key]

    def tree(self, name: str, window: EvaluationWindow) -> InterestHierarchy:
        assert self.hierarchy is not None, "no materialised tree to take the sizes from"
        if name not in self._trees:
            sizes = self.hierarchy.tree.primitives_per_level()
            items = self.vectors(name, window)[1]
            self._trees[name] = build_hierarchy(
                items,
                HierarchyConfig(sizes=sizes),
                self.content.get(self.graph.metadata.item_type),
                self.events,
            )
        return self._trees[name]

    @cached_property
    def events(self) -> FunnelEvents:
        """The positive funnel events before t2: the trees' coarse levels, the users' bags."""
        return funnel_events(self.graph, before=self.as_of)

    @cached_property
    def interaction_history(self) -> InteractionHistory:
        return InteractionHistory.of(self.graph)

    def fitted(self) -> dict[str, Fitted]:
        """A recommender builder per model of ours (every seed), its content-only view and its
        token retrieval."""
        comparison = self.comparison

        def by_embedding(name: str) -> Fitted:
            def build(window: EvaluationWindow) -> Recommender:
                model = comparison.models[name]
                pairs = None
                if model.history_bias is not None:
                    pairs = history_scores(
                        model, self.interaction_history, window.users, self.as_of
                    )
                return EmbeddingRecommender(window.users, *self.vectors(name, window), pairs)

            return build

        def content_only(window: EvaluationWindow) -> Recommender:
            items = content_item_vectors(comparison.models[OURS], self.graph, self.content)
            return EmbeddingRecommender(window.users, self.vectors(OURS, window)[0], items)

        def tokens(window: EvaluationWindow) -> Recommender:
            assert self.hierarchy is not None
            return TokenRecommender(
                window.users,
                self.vectors(OURS, window)[0],
                self.tree(OURS, window),
                self.hierarchy.tokens,
                self.events,
                self.as_of,
            )

        fitted = {name: by_embedding(name) for name in comparison.models}
        if comparison.content_only:
            fitted[CONTENT_ONLY] = content_only
        if self.hierarchy is not None:
            fitted[TOKENS] = tokens
        return fitted


def _mean(values: Sequence[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None
