"""All baselines on one split, one candidate set and one protocol, tuned with equal effort.

Protocol, in order:
  1. Tuning: history = interactions before t0 = t1 - (t2 - t1); window = [t0, t1), as long as the
     real one, with its warm users (below). Each baseline fits its grid's settings (`BASELINES`:
     every profile of `profiles.py`, which stages build a user's profile and whether "not
     interested" subtracts, times the baseline's own axes; settings with a negative weight are
     skipped when the tuning history has no negative event, since they would repeat others) there
     and keeps the best MAP@10. Trained baselines (lightgcn, graphsage, sasrec) get the same `FitBudget`
     (default 1000 steps, no wall clock: the same seed gives the same score on a loaded machine
     or an idle one) and try their grid by successive halving (`Halving`: every fit for a ninth
     of the steps, the best third for a third, the best of those for all; a longer fit continues
     the shorter one, `Fits`), the fit's length part of the chosen setting (`STEPS`).
  2. Candidates: every item of the item table. Whether a user's already-bought items stay
     candidates is decided on the tuning window: if fewer than 5% of its target-stage events repeat
     an earlier (user, item) pair (`repeat_rate`), seen items are excluded, else kept.
  3. Final: each baseline refits its chosen setting on everything before t1 and ranks all items
     for the warm users (>= 1 interaction before t1) of [t1, t2), at most `max_users` of them.
     recall@k for every k, ndcg and map at the smallest k, on the target stage's events. Equal
     scores are ordered by training popularity (`recommend`), the same for every baseline.
  4. Cold items: `cold_item_recall@50` is recall@50 of the same full ranking (all items compete)
     where only items without an interaction before t1 count as relevant (first engagement at or
     after t1, `first_engagement_time`: catalogue rows rarely carry a creation time), averaged
     over the warm users who have such an item in the window (NaN where there are none).
  5. Models trained elsewhere (`fitted`: our model and its ablations) skip steps 1 and 3's fit:
     each is built for the final window's users and ranked and scored exactly as in 3 and 4.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from torch import Tensor

from hier_pipeline.evaluation.baselines.content_knn import ContentKNN
from hier_pipeline.evaluation.baselines.ease import EASE
from hier_pipeline.evaluation.baselines.graphsage import GraphSAGERecommender
from hier_pipeline.evaluation.baselines.interactions import Interactions
from hier_pipeline.evaluation.baselines.itemknn import ItemKNN
from hier_pipeline.evaluation.baselines.lightgcn import LightGCNRecommender
from hier_pipeline.evaluation.baselines.popularity import Popularity
from hier_pipeline.evaluation.baselines.profiles import PROFILE_KEYS, profile_of, profiled_grid
from hier_pipeline.evaluation.baselines.protocol import (
    REPEAT_THRESHOLD,
    keep_items,
    repeat_rate,
    warm_window,
)
from hier_pipeline.evaluation.baselines.recommender import FitBudget, Memo, Profiled, Recommender
from hier_pipeline.evaluation.baselines.repeat import Repeat
from hier_pipeline.evaluation.baselines.sasrec import SASRec
from hier_pipeline.evaluation.baselines.tifuknn import TIFUKNN
from hier_pipeline.evaluation.baselines.tuning import (
    STEPS,
    Halving,
    Setting,
    TuningResult,
    fit_and_rank,
    tune,
    tune_trained,
)
from hier_pipeline.evaluation.baselines.workers import forked_map
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.split import TemporalSplit, first_engagement_time
from hier_pipeline.ranking.metrics import UserItems, ranking_metrics
from hier_pipeline.ranking.window import EvaluationWindow

COLD_K = 50
EASE_MAX_ITEMS = 10_000  # EASE's item subset (see `EASE`)
FIT_BUDGET = FitBudget(steps=1000)  # per fit of a trained baseline
# Baselines tuned side by side (`forked_map`), one thread each: on 2 cores Complete Journey's
# nine took 864 s instead of 1,017 on two threads in one process, 9.9 GB instead of 12.3 at the
# peak (docs/evaluation.md, "The baselines side by side"). 1: one after another, here.
BASELINE_WORKERS = 2


# A model trained before the evaluation: built for the final window (its users), not refit.
Fitted = Callable[[EvaluationWindow], Recommender]


@dataclass(frozen=True)
class Context:
    """What building a baseline may need besides its setting."""

    graph: RelationalGraph
    content: Mapping[str, Mapping[str, Tensor]]
    budget: FitBudget
    seed: int
    ease_max_items: int
    memo: Memo = field(default_factory=Memo)  # shared by the settings of a grid, see `Memo`


@dataclass(frozen=True)
class Baseline:
    """`build` makes the recommender of the baseline's own settings; `grid` (a `profiled_grid`)
    adds the profile, which `profiled` applies around it."""

    build: Callable[[Context, Setting], Recommender]
    grid: tuple[Setting, ...]
    trained: bool = False  # optimised by gradient steps under the `FitBudget`: minutes, not seconds
    shared: tuple[str, ...] = ()  # axes scored from one fit (`tune_trained`)

    def profiled(self, context: Context, setting: Setting) -> Recommender:
        own = {key: value for key, value in setting.items() if key not in PROFILE_KEYS}
        if STEPS in own:  # a trained fit's length, chosen in tuning (`tune_trained`)
            context = replace(context, budget=replace(context.budget, steps=own.pop(STEPS)))
        return Profiled(self.build(context, own), profile_of(setting), context.memo)


def _content_knn(context: Context, setting: Setting) -> Recommender:
    content = context.content.get(context.graph.metadata.item_type, {})
    return ContentKNN(content, memo=context.memo, **setting)


def _lightgcn(context: Context, setting: Setting) -> Recommender:
    item_time = context.graph.data[context.graph.metadata.item_type].time
    return LightGCNRecommender(
        item_time, budget=context.budget, seed=context.seed, memo=context.memo, **setting
    )


def _graphsage(context: Context, setting: Setting) -> Recommender:
    return GraphSAGERecommender(
        context.graph,
        context.content,
        budget=context.budget,
        seed=context.seed,
        memo=context.memo,
        **setting,
    )


def _sasrec(context: Context, setting: Setting) -> Recommender:
    return SASRec(budget=context.budget, seed=context.seed, memo=context.memo, **setting)


# Own axes: orders that make consecutive settings share a memo (ItemKNN's deepest neighbour
# count first; EASE's lambda and LightGCN's depth before the blend). EASE's lambda spans
# 0.1-1000: without a buy-again term an independent implementation found 0.2-5 best on Complete
# Journey and a collapse at >= 100; with it, validation MAP@10 there is flat over the range
# (docs/evaluation.md).
BASELINES: dict[str, Baseline] = {
    "popularity": Baseline(
        lambda _, s: Popularity(**s), profiled_grid({"window_days": (7.0, 14.0, 28.0, 56.0, None)})
    ),
    "repeat": Baseline(
        lambda _, s: Repeat(**s),
        profiled_grid({"half_life_days": (15.0, 60.0, 240.0)}, negatives=True),
    ),
    "itemknn": Baseline(
        lambda c, s: ItemKNN(memo=c.memo, **s),
        profiled_grid(
            {"shrink": (0.0, 10.0), "neighbours": (400, 100, 20), "self_weight": (0.0, 1.0)},
            negatives=True,
        ),
    ),
    "ease": Baseline(
        lambda c, s: EASE(max_items=c.ease_max_items, memo=c.memo, **s),
        profiled_grid(
            {"l2": (0.1, 1.0, 10.0, 100.0, 1000.0), "repeat_weight": (0.0, 0.5, 2.0)},
            negatives=True,
        ),
    ),
    "content_knn": Baseline(
        _content_knn,
        profiled_grid(
            {"neighbours": (200, 10, None), "half_life_days": (7.0, 30.0, None)}, negatives=True
        ),
    ),
    "lightgcn": Baseline(
        _lightgcn,
        profiled_grid({"num_layers": (1, 2, 3), "repeat_weight": (0.0, 1.0, 4.0, 16.0)}),
        trained=True,
        shared=("repeat_weight",),
    ),
    "graphsage": Baseline(
        _graphsage,
        profiled_grid({"temperature": (0.05, 0.1, 0.2), "repeat_weight": (0.0, 1.0, 4.0, 16.0)}),
        trained=True,
        shared=("repeat_weight",),
    ),
    "tifuknn": Baseline(
        lambda _, s: TIFUKNN(**s), profiled_grid({"neighbours": (100, 300), "alpha": (0.7, 0.9)})
    ),
    # Its sequences are the target stage's items whatever the stage weights: other profiles
    # would only repeat the same fits.
    "sasrec": Baseline(
        _sasrec,
        tuple(s for s in profiled_grid({"dropout": (0.2, 0.5)}) if s["profile"] == "all"),
        trained=True,
    ),
}
# What a quick comparison runs: the closed-form and counting baselines, seconds each. The trained
# ones took 15 of the 16 evaluation minutes of the synthetic demo and lose to EASE and ItemKNN on
# both datasets measured (README, Evaluation).
QUICK_BASELINES = tuple(name for name, baseline in BASELINES.items() if not baseline.trained)


def tuned(
    name: str,
    setting: Setting,
    graph: RelationalGraph,
    content: Mapping[str, Mapping[str, Tensor]],
    budget: FitBudget = FIT_BUDGET,
    seed: int = 0,
) -> Recommender:
    """The recommender `evaluate_baselines` builds for `name` at `setting` (its tuned one), anew:
    to serve users the evaluation did not rank, e.g. cold ones."""
    return BASELINES[name].profiled(Context(graph, content, budget, seed, EASE_MAX_ITEMS), setting)


@dataclass
class BaselineEvaluation:
    """Results, and the window they were measured on: score another model on `window` (same
    users, same relevant items; exclude seen items iff `exclude_seen`) to compare like for like."""

    window: EvaluationWindow
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # baseline -> metric
    tuning: dict[str, TuningResult] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # tuning + final fit + ranking
    # model -> its final ranking of the window's users, [U, max(ks, COLD_K)]: what per-user
    # figures (intervals, segments) are computed from
    rankings: dict[str, Tensor] = field(default_factory=dict)
    repeat_rate: float = float("nan")
    exclude_seen: bool = False
    num_users: int = 0
    num_cold_users: int = 0

    def in_order(self, names: Sequence[str]) -> None:
        """Put `names` first in every table, in that order (workers finish in any order)."""
        tables: list[dict[str, Any]] = [self.tuning, self.metrics, self.seconds, self.rankings]
        for table in tables:
            table.update([(name, table.pop(name)) for name in names])

    @property
    def settings(self) -> dict[str, Setting]:
        """The setting each baseline was tuned to."""
        return {name: result.best for name, result in self.tuning.items()}


def evaluate_baselines(
    graph: RelationalGraph,
    content: Mapping[str, Mapping[str, Tensor]],
    split: TemporalSplit,
    names: Sequence[str] = tuple(BASELINES),
    k_values: Sequence[int] = (10, 50, 100),
    max_users: int = 1000,
    seed: int = 0,
    budget: FitBudget = FIT_BUDGET,
    ease_max_items: int = EASE_MAX_ITEMS,
    progress: Callable[[str], None] | None = None,
    fitted: Mapping[str, Fitted] | None = None,
    halving: Halving | None = None,
    workers: int = 1,
) -> BaselineEvaluation:
    """Tune, refit and score the named baselines, then score the `fitted` models on the same
    window, as the module doc describes. With `workers` > 1 the baselines run side by side in
    that many forked single-threaded processes (`forked_map`); the fitted ones run here."""
    unknown = set(names) - set(BASELINES)
    if unknown:
        raise ValueError(f"unknown baselines {sorted(unknown)}; known: {sorted(BASELINES)}")
    fitted = fitted or {}
    if clash := set(names) & set(fitted):
        raise ValueError(f"fitted models may not reuse baseline names: {sorted(clash)}")
    context = Context(graph, content, budget, seed, ease_max_items)
    tune_start = split.t1 - (split.t2 - split.t1)
    tune_history = Interactions.from_graph(graph, tune_start)
    tune_window = warm_window(graph, tune_history, tune_start, split.t1, max_users, seed)
    history = Interactions.from_graph(graph, split.t1)
    window = warm_window(graph, history, split.t1, split.t2, max_users, seed)
    rate = repeat_rate(graph, tune_start, split.t1)
    cold_relevant = keep_items(window.relevant, first_engagement_time(graph) >= split.t1)
    result = BaselineEvaluation(
        window=window,
        repeat_rate=rate,
        exclude_seen=rate < REPEAT_THRESHOLD,
        num_users=len(window.users),
        num_cold_users=int((cold_relevant.counts() > 0).sum()),
    )
    ks, depth = sorted(k_values), max(*k_values, COLD_K)

    def record(name: str, topk: Tensor, seconds: float, note: str = "") -> None:
        result.rankings[name] = topk
        result.metrics[name] = window_metrics(topk, window.relevant, cold_relevant, ks)
        result.seconds[name] = seconds
        if progress is not None:
            progress(f"{name}: {result.metrics[name]}{note} in {seconds:.0f} s")

    def tuned_ranking(name: str) -> tuple[TuningResult, Tensor, float]:
        # A memo of its own per baseline, cleared when it is ranked: what one grid shares
        # (neighbour tables, factors, a sampler's index, the fits halving continues) is not
        # held while the next baselines and the fitted models run, so memory peaks at the
        # largest baseline's, not at their sum (docs/evaluation.md, 2026-12-07).
        own = replace(context, memo=Memo())
        started = time.perf_counter()
        baseline = BASELINES[name]
        recommender_at = partial(baseline.profiled, own)
        grid = tuning_grid(baseline.grid, tune_history)
        window_args = (tune_history, tune_window, result.exclude_seen)
        try:
            if baseline.trained:
                steps, shared = budget.steps, baseline.shared
                tuning = tune_trained(
                    recommender_at, grid, *window_args, steps, shared, halving, k=ks[0]
                )
            else:
                tuning = tune(recommender_at, grid, *window_args, k=ks[0])
            final = baseline.profiled(own, tuning.best)
            topk = fit_and_rank(final, history, window, depth, result.exclude_seen)
        finally:
            own.memo.clear()
        return tuning, topk, time.perf_counter() - started

    # the trained ones first: the longest jobs start first, so the workers end close together
    ordered = sorted(names, key=lambda name: not BASELINES[name].trained)
    for index, (tuning, topk, seconds) in forked_map(tuned_ranking, ordered, workers):
        result.tuning[ordered[index]] = tuning
        record(ordered[index], topk, seconds, f" with {tuning.best}")
    result.in_order(names)
    for name, build in fitted.items():
        started = time.perf_counter()
        topk = fit_and_rank(build(window), history, window, depth, result.exclude_seen)
        record(name, topk, time.perf_counter() - started)
    return result


def tuning_grid(grid: Sequence[Setting], history: Interactions) -> list[Setting]:
    """The grid less its negative-feedback settings where `history` has no negative event (they
    would fit exactly what the same setting without them fits)."""
    if len(history.negative_user):
        return list(grid)
    return [setting for setting in grid if not setting.get("negative")]


def window_metrics(
    topk: Tensor, relevant: UserItems, cold_relevant: UserItems, ks: Sequence[int]
) -> dict[str, float]:
    """What every model is judged on: recall@k for every k, ndcg and map at the smallest k, and
    recall@COLD_K with only cold items relevant. Shapes: topk [U, >= max(ks, COLD_K)]."""
    scores = ranking_metrics(topk, relevant, ks)
    metrics = {f"recall@{k}": scores[f"recall@{k}"] for k in ks}
    metrics.update({f"{m}@{ks[0]}": scores[f"{m}@{ks[0]}"] for m in ("ndcg", "map")})
    cold = ranking_metrics(topk[:, :COLD_K], cold_relevant, (COLD_K,))
    metrics[f"cold_item_recall@{COLD_K}"] = cold[f"recall@{COLD_K}"]
    return metrics
