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
from functools import cache

import numpy as np
from torch import Tensor

from hier_pipeline.evaluation.ablations import CONTENT_ONLY
from hier_pipeline.evaluation.baselines.evaluate import (
    BASELINES,
    FIT_BUDGET,
    Fitted,
    evaluate_baselines,
)
from hier_pipeline.evaluation.baselines.recommender import FitBudget, Recommender
from hier_pipeline.evaluation.interest_recommender import (
    EmbeddingRecommender,
    TokenRecommender,
    content_item_vectors,
    graph_vectors,
)
from hier_pipeline.evaluation.report import HISTORY_SHARE, OURS, EvaluationReport, HierarchyScores
from hier_pipeline.evaluation.segments import (
    SEGMENT_K,
    engaged_before,
    history_share,
    segment_recall,
    split_relevant,
)
from hier_pipeline.evaluation.truth import level_scores
from hier_pipeline.evaluation.uncertainty import intervals, versus
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.split import TemporalSplit
from hier_pipeline.interests.artifact import HierarchyArtifact, TokensArtifact
from hier_pipeline.interests.hierarchy import InterestHierarchy
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
    max_users: int = 1000
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
    fitted = _fitted(graph, content, split.t2, comparison, hierarchy)
    result = evaluate_baselines(
        graph,
        content,
        TemporalSplit(split.t2, end),
        comparison.baselines,
        max_users=comparison.max_users,
        seed=comparison.seed,
        budget=comparison.budget,
        progress=progress,
        fitted=fitted,
    )
    window, rankings = result.window, result.rankings
    seen = engaged_before(graph, window.users, split.t2)
    positives = split_relevant(window.relevant, seen)
    segments: dict[str, dict[str, dict[str, float]]] = {name: {} for name in positives}
    for name, topk in rankings.items():
        result.metrics[name][HISTORY_SHARE] = history_share(topk, seen)
        for segment, recall in segment_recall(topk, positives).items():
            segments[segment][name] = {f"recall@{SEGMENT_K}": recall}
    baselines = [name for name in comparison.baselines if name in rankings]
    scores = None
    if hierarchy is not None:
        scores = HierarchyScores(
            level_scores(hierarchy.tree, hierarchy.truth),
            result.metrics[TOKENS]["recall@50"],
            result.metrics[OURS]["recall@50"],
            _mean([level["ari"] for level in hierarchy.stability]),
        )
    return EvaluationReport(
        dataset=dataset,
        target_stage=graph.metadata.stages[-1],
        t1=split.t1,
        t2=split.t2,
        end=end,
        models=result.metrics,
        settings=result.settings,
        seconds=result.seconds,
        hierarchy=scores,
        history=comparison.history,
        repeat_rate=result.repeat_rate,
        exclude_seen=result.exclude_seen,
        users=result.num_users,
        cold_users=result.num_cold_users,
        intervals=intervals(rankings, window.relevant, comparison.seed),
        versus=versus(rankings, window.relevant, OURS, baselines, comparison.seed),
        segments=segments,
    )


def _fitted(
    graph: RelationalGraph,
    content: Mapping[str, Mapping[str, Tensor]],
    as_of: int,
    comparison: Comparison,
    hierarchy: HierarchyInputs | None,
) -> dict[str, Fitted]:
    """A recommender builder per model of ours; each model embeds the window's users once."""
    vectors: dict[str, tuple[Tensor, Tensor]] = {}

    @cache  # built once, and only if a model has the history term
    def interaction_history() -> InteractionHistory:
        return InteractionHistory.of(graph)

    def embedded(name: str, window: EvaluationWindow) -> tuple[Tensor, Tensor]:
        if name not in vectors:
            model = comparison.models[name]
            vectors[name] = graph_vectors(
                model, graph, content, comparison.fanouts, as_of, window.users
            )
        return vectors[name]

    def by_embedding(name: str) -> Fitted:
        def build(window: EvaluationWindow) -> Recommender:
            model = comparison.models[name]
            pairs = None
            if model.history_bias is not None:
                pairs = history_scores(model, interaction_history(), window.users, as_of)
            return EmbeddingRecommender(window.users, *embedded(name, window), pairs)

        return build

    def content_only(window: EvaluationWindow) -> Recommender:
        items = content_item_vectors(comparison.models[OURS], graph, content)
        return EmbeddingRecommender(window.users, embedded(OURS, window)[0], items)

    fitted = {name: by_embedding(name) for name in comparison.models}
    if comparison.content_only:
        fitted[CONTENT_ONLY] = content_only
    if hierarchy is not None:
        fitted[TOKENS] = lambda window: TokenRecommender(
            window.users, *embedded(OURS, window), hierarchy.tree, hierarchy.tokens
        )
    return fitted


def _mean(values: Sequence[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None
