"""All baselines end to end on the tiny synthetic world, and the protocol pieces they share."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from hier_pipeline.evaluation.baselines import (
    BASELINES,
    STEPS,
    FitBudget,
    GraphSAGERecommender,
    Interactions,
    Memo,
    evaluate_baselines,
    repeat_rate,
    warm_window,
)
from hier_pipeline.evaluation.baselines.evaluate import BASELINE_WORKERS, EASE_MAX_ITEMS, Context
from hier_pipeline.evaluation.baselines.graphsage import HeteroSAGE
from hier_pipeline.evaluation.baselines.profiles import STAGE_RATIOS
from hier_pipeline.ranking.window import target_window


def test_interactions_keep_positive_funnel_events_before_the_cutoff(synthetic_pipeline) -> None:
    graph, _, split = synthetic_pipeline
    engaged = graph.data[graph.metadata.engaged]
    history = Interactions.from_graph(graph, split.t1, torch.tensor([0.1, 0.2, 0.3, 1.0]))
    expected = (engaged.edge_time < split.t1) & (engaged.edge_stage >= 0) & ~engaged.edge_negative
    assert len(history.user) == int(expected.sum()) > 0
    assert int(history.time.max()) < split.t1
    assert history.weight.tolist() == pytest.approx(
        [[0.1, 0.2, 0.3, 1.0][s] for s in history.stage.tolist()]
    )


def test_repeat_rate_matches_a_brute_force_count(synthetic_pipeline) -> None:
    graph, _, split = synthetic_pipeline
    engaged = graph.data[graph.metadata.engaged]
    target = len(graph.metadata.stages) - 1
    events = list(
        zip(
            engaged.edge_index[0].tolist(),
            engaged.edge_index[1].tolist(),
            engaged.edge_time.tolist(),
            engaged.edge_stage.tolist(),
            strict=True,
        )
    )
    earlier = {(u, i) for u, i, t, s in events if s == target and t < split.t1}
    window = [
        (u, i) in earlier for u, i, t, s in events if s == target and split.t1 <= t < split.t2
    ]
    assert repeat_rate(graph, split.t1, split.t2) == pytest.approx(sum(window) / len(window))


def test_warm_window_keeps_warm_users_and_their_items(synthetic_pipeline) -> None:
    graph, _, split = synthetic_pipeline
    history = Interactions.from_graph(graph, split.t1)
    full = target_window(graph, split.t1, split.t2, max_users=10**9)
    window = warm_window(graph, history, split.t1, split.t2, max_users=5, seed=1)
    assert 0 < len(window.users) <= 5
    assert history.active_users()[window.users].all()
    for row, user in enumerate(window.users.tolist()):
        source = full.users.tolist().index(user)
        expected = full.relevant.items[
            full.relevant.rowptr[source] : full.relevant.rowptr[source + 1]
        ]
        got = window.relevant.items[window.relevant.rowptr[row] : window.relevant.rowptr[row + 1]]
        assert torch.equal(got, expected)


def test_every_baseline_runs_end_to_end(synthetic_pipeline) -> None:
    graph, content, split = synthetic_pipeline
    result = evaluate_baselines(
        graph, content, split, budget=FitBudget(steps=1), workers=BASELINE_WORKERS
    )
    assert list(result.metrics) == list(result.tuning) == list(result.rankings) == list(BASELINES)
    assert result.num_users > 0
    assert result.exclude_seen == (result.repeat_rate < 0.05)
    assert set(result.metrics) == set(BASELINES)
    for name, metrics in result.metrics.items():
        assert set(metrics) == {
            "recall@10",
            "recall@50",
            "recall@100",
            "ndcg@10",
            "map@10",
            "cold_item_recall@50",
        }
        for metric, value in metrics.items():
            if metric.startswith("cold") and result.num_cold_users == 0:
                assert math.isnan(value)
            else:
                assert 0.0 <= value <= 1.0, (name, metric)
        tried = [setting for setting, _ in result.tuning[name].scores]
        if BASELINES[name].trained:  # by successive halving: every setting, the leaders longer
            assert {setting[STEPS] for setting in tried} == {1}  # a 1-step budget: every rung
            assert len(tried) > len(BASELINES[name].grid)
            tried = tried[: len(BASELINES[name].grid)]
            assert result.settings[name][STEPS] == 1
        chosen = {key: value for key, value in result.settings[name].items() if key != STEPS}
        assert chosen in BASELINES[name].grid
        assert result.settings[name]["profile"] in STAGE_RATIOS  # the chosen profile is shown
        untimed = [{key: value for key, value in s.items() if key != STEPS} for s in tried]
        assert untimed == list(BASELINES[name].grid)  # negatives exist: the whole grid


def test_baselines_in_workers_score_as_one_after_another_on_one_thread(
    synthetic_pipeline,
) -> None:
    """A worker runs one torch thread: the same baselines one after another on one thread in
    this process must tune, rank and score exactly alike, so the workers change the time only."""
    graph, content, split = synthetic_pipeline
    names = ["sasrec", "repeat", "lightgcn", "ease"]
    run = partial(evaluate_baselines, graph, content, split, names, budget=FitBudget(steps=3))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        alone = run(workers=1)
    finally:
        torch.set_num_threads(threads)
    side_by_side = run(workers=2)
    assert list(side_by_side.metrics) == names
    assert repr(side_by_side.metrics) == repr(alone.metrics)  # to the last bit; NaN as NaN
    assert repr(side_by_side.tuning) == repr(alone.tuning)
    for name in names:
        assert torch.equal(side_by_side.rankings[name], alone.rankings[name])


@pytest.mark.parametrize("name", ["lightgcn", "graphsage", "sasrec"])
def test_a_longer_fit_continues_a_shorter_one_to_the_same_scores(name, synthetic_pipeline) -> None:
    """Successive halving fits a setting for 2 steps, then 5: continuing the 2-step fit (`Fits`)
    must end exactly where one 5-step fit does (model, optimiser and both generators kept)."""
    graph, content, split = synthetic_pipeline
    history = Interactions.from_graph(graph, split.t1)
    users = history.user.unique()[:4]
    setting = BASELINES[name].grid[-1]

    def scores(context: Context, steps: int) -> torch.Tensor:
        recommender = BASELINES[name].profiled(context, {**setting, STEPS: steps})
        recommender.fit(history)
        return recommender.score(users)

    def context() -> Context:
        return Context(graph, content, FitBudget(), 3, EASE_MAX_ITEMS)

    shared = context()
    shorter = scores(shared, 2)
    continued = scores(shared, 5)
    assert not torch.equal(shorter, continued)  # the steps matter
    assert torch.equal(continued, scores(context(), 5))


def test_graphsage_repeat_weight_adds_own_items_on_the_fit_it_shares(synthetic_pipeline) -> None:
    graph, content, split = synthetic_pipeline
    history = Interactions.from_graph(graph, split.t1)
    users = history.user.unique()[:4]
    settings = dict(dim=16, budget=FitBudget(steps=2), batch_size=16, seed=5, memo=Memo())
    plain, blended, buy_again = (
        GraphSAGERecommender(graph, content, repeat_weight=weight, **settings)
        for weight in (0.0, 4.0, 1000.0)
    )
    for model in (plain, blended, buy_again):
        model.fit(history)
    assert blended.model is plain.model and buy_again.model is plain.model  # one fit for all
    assert blended.sampler is plain.sampler  # and one index of the graph
    base, scores = plain.score(users), blended.score(users)
    own = history.confidence().dense(users)
    torch.testing.assert_close(scores, base + 4.0 * base.std(dim=1, keepdim=True) * own)
    best = buy_again.score(users).argmax(dim=1, keepdim=True)
    assert (own.gather(1, best) > 0).all()  # a heavy weight ranks the user's own items first


def test_graphsage_updates_its_embedding_tables_sparsely(synthetic_pipeline) -> None:
    """The tables a step reads a few rows of (item identities, hashed categories) take sparse
    gradients and `SparseAdam`; every other parameter dense Adam; none both, none left out."""
    graph, content, _ = synthetic_pipeline
    recommender = GraphSAGERecommender(graph, content, dim=16)
    meta = graph.metadata
    model = HeteroSAGE(recommender.data, content, meta.hash_buckets, 16, 1, (meta.item_type, 0.5))
    sparse_adam, adam = model.optimizers(1e-3)
    assert isinstance(sparse_adam, torch.optim.SparseAdam)
    tables = [model.identities, model.inputs.categories]
    assert all(table is not None and table.sparse for table in tables)
    in_sparse = {id(p) for group in sparse_adam.param_groups for p in group["params"]}
    in_dense = {id(p) for group in adam.param_groups for p in group["params"]}
    assert {id(table.weight) for table in tables if table is not None} <= in_sparse
    assert not in_sparse & in_dense
    assert in_sparse | in_dense == {id(p) for p in model.parameters()}


def test_graphsage_is_deterministic_under_a_seed(synthetic_pipeline) -> None:
    graph, content, split = synthetic_pipeline
    history = Interactions.from_graph(graph, split.t1)
    users = history.user.unique()[:4]

    def scores() -> torch.Tensor:
        model = GraphSAGERecommender(
            graph, content, dim=16, budget=FitBudget(steps=2), batch_size=16, seed=5
        )
        model.fit(history)
        return model.score(users)

    first = scores()
    assert first.shape == (4, graph.data[graph.metadata.item_type].num_nodes)
    assert torch.isfinite(first).all()
    assert torch.equal(first, scores())
