"""Our model, its ablations and every baseline on one window: the numbers of the evaluation report.

Protocol. Our model is trained on events before t1 and early-stopped on [t1, t2), so the final
comparison is on the window after it, [t2, end), end = the last event + 1:
  - baselines run `evaluate_baselines` on the split (t2, end): tuned on a window as long as the
    evaluated one just before t2, then refit on everything before t2;
  - our models are embedded as of t2 (inductively, from neighbourhoods before t2, with no
    retraining) and ranked by the second-stage ranker (`hier_pipeline.ranker`), fitted on
    [t1, t2) from what was known at t1 (`ours.py`), on the same window: same warm users, same
    relevant items, the same rule for already-bought items, the same popularity tie-break;
  - `hier_no_ranker` ranks by the model's own score instead (inner product plus, where the model
    has it, the personal-history term); the `hier_ranker_*` views and `hier_counts_only` by
    rankers without some of its signals or its cold-item steps (`ablations.py`);
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
    baseline with a paired interval (`uncertainty.py`), and its first seed minus each of its
    views and trained ablations (`versus_ablations`: what the part an ablation leaves out, or
    the option it switches on, changes), and recall on repeat vs explore positives
    with the share of each top 50 taken from the user's history (`segments.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from torch import Tensor

from hier_pipeline.evaluation.baselines.evaluate import (
    BASELINES,
    evaluate_baselines,
    tuned,
)
from hier_pipeline.evaluation.cold_users import POPULARITY, cold_user_rankings
from hier_pipeline.evaluation.comparison import Comparison, HierarchyInputs
from hier_pipeline.evaluation.ours import TOKENS, OurModels
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
from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.quality import level_agreement
from hier_pipeline.interests.tokens import TokenConfig


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
    ours = OurModels(graph, content, comparison, split.t2, split.t2 - split.t1, hierarchy)
    result = evaluate_baselines(
        graph,
        content,
        TemporalSplit(split.t2, end),
        comparison.baselines,
        max_users=comparison.max_users,
        seed=comparison.seed,
        budget=comparison.budget,
        progress=progress,
        workers=comparison.baseline_workers,
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
    # ours against its views and trained ablations (trained with its first seed), paired on the
    # same users, before the seeds are pooled
    named = (*comparison.models, *comparison.views)
    ablations = [n for n in named if n != OURS and not is_seed(n) and n in figures]
    versus_ablations = versus(figures, OURS, ablations, comparison.seed)
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
        tree = ours.tree(OURS, split.t2)
        scores = HierarchyScores(
            level_scores(tree, hierarchy.truth),
            result.metrics[TOKENS]["recall@50"],
            result.metrics[OURS]["recall@50"],
            _mean([level["ari"] for level in hierarchy.stability]),
            training_seed_ari=_seed_agreement(tree, ours.tree(seeds[1], split.t2))
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
        settings={**result.settings, **ours.settings},
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
        versus_ablations=versus_ablations,
    )


def _seed_agreement(tree: InterestHierarchy, other: InterestHierarchy) -> list[float]:
    """ARI per level between the trees of two training seeds: whether a token survives a
    retrain, not only another k-means seed."""
    return [
        level_agreement(tree.members[:, level], other.members[:, level])["ari"]
        for level in range(min(tree.levels, other.levels))
    ]


def _mean(values: Sequence[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None
