"""The second-stage ranker on the tiny synthetic world: its candidates, its fit, its ranking."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hier_pipeline.evaluation.interest_recommender import RankedRecommender
from hier_pipeline.graph.build import NEVER
from hier_pipeline.ranker.counts import (
    COLD_ITEM,
    SECONDS_PER_DAY,
    Counts,
    FunnelLog,
    listing_columns,
)
from hier_pipeline.ranker.ranker import InnerProduct, InterestRanker, RankerConfig, TooFewLabels
from hier_pipeline.ranker.selection import candidate_ap
from hier_pipeline.ranking.metrics import PairScores, UserItems
from hier_pipeline.ranking.window import EvaluationWindow, target_window, window_items

HORIZON = int(60 * SECONDS_PER_DAY)  # the tiny world: 52 purchases over 176 days


@pytest.fixture(scope="module")
def world(synthetic_pipeline: tuple) -> tuple[object, FunnelLog, int]:
    graph = synthetic_pipeline[0]
    log = FunnelLog.of(graph)
    purchases = log.time[(log.stage == log.target) & ~log.negative]
    return graph, log, int(np.quantile(purchases, 0.2))


def _embedding(log: FunnelLog, users: int, seed: int = 0) -> dict[str, InnerProduct]:
    """Unit vectors standing in for any model's embeddings: the ranker reads them as inputs."""
    generator = torch.Generator().manual_seed(seed)
    return {
        "embedding": InnerProduct(
            F.normalize(torch.randn(users, 8, generator=generator), dim=1),
            F.normalize(torch.randn(log.num_items, 8, generator=generator), dim=1),
        )
    }


def _changed_rows(shown: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Rows where the fit's features differ from the candidates' (NaN equal to NaN)."""
    same = (shown == features) | (np.isnan(shown) & np.isnan(features))
    return ~np.all(same, axis=1)


def _fitted(world: tuple, embedding: bool) -> tuple[InterestRanker, EvaluationWindow]:
    graph, log, start = world
    window = target_window(graph, start, start + HORIZON, max_users=1000)
    ranker = InterestRanker(RankerConfig(seed=3, min_relevant=5))  # the tiny world
    signals = _embedding(log, len(window.users)) if embedding else {}
    candidates = ranker.candidates(Counts(log, start, HORIZON), window.users, signals)
    ranker.fit(candidates, window.relevant)
    return ranker, window


def test_candidates_are_the_history_the_trend_and_the_embeddings_top(world: tuple) -> None:
    _, log, start = world
    counts, users = Counts(log, start, HORIZON), torch.tensor([0, 5, 9])
    signals = _embedding(log, len(users))
    config = RankerConfig(signal_candidates=7, popular_candidates=4)
    candidates = InterestRanker(config).candidates(counts, users, signals)
    rows, items = counts.history_pairs(users)
    embedding = signals["embedding"]
    top = (embedding.users @ embedding.items.T).topk(7, dim=1).indices
    for row in range(len(users)):
        expected = {*items[rows == row].tolist(), *counts.popular(4).tolist(), *top[row].tolist()}
        assert sorted(candidates.items[candidates.rows == row].tolist()) == sorted(expected)
    names = InterestRanker.feature_names(log.stages, signals)
    assert candidates.features.shape == (len(candidates.rows), len(names))
    in_top = candidates.items == top[candidates.rows, 0]
    assert np.all(candidates.features[in_top.numpy(), -1] == 0.0)  # the best by embedding: rank 0


def test_a_content_signal_adds_its_top_new_items_where_asked(world: tuple) -> None:
    """Items without a positive event before the window get places of their own in the lists of
    the signals that are not behavioural (here "content"), none in a behavioural one's."""
    _, log, start = world
    counts, users = Counts(log, start, HORIZON), torch.tensor([0, 5, 9])
    signals = {
        **_embedding(log, len(users)),
        "content": _embedding(log, len(users), 1)["embedding"],
    }
    eventless = torch.from_numpy(counts.item_eventless)
    assert eventless.any() and not eventless.all()
    config = RankerConfig(signal_candidates=7, popular_candidates=4)
    plain = InterestRanker(config).candidates(counts, users, signals, ("embedding",))
    widened = InterestRanker(replace(config, new_item_candidates=3)).candidates(
        counts, users, signals, ("embedding",)
    )
    content = signals["content"]
    scores = (content.users @ content.items.T).masked_fill(~eventless, -torch.inf)
    fresh = scores.topk(3, dim=1).indices
    for row in range(len(users)):
        before = set(plain.items[plain.rows == row].tolist())
        after = set(widened.items[widened.rows == row].tolist())
        assert after == before | set(fresh[row].tolist())
        assert all(bool(eventless[item]) for item in after - before)


def test_the_fit_ranks_the_next_windows_events_above_the_rest(world: tuple) -> None:
    """Fitted on [start, start + h), scored as of start + h for the window after it: relevant
    candidates score higher than the others (AUC over all candidates of the window's users)."""
    graph, log, start = world
    ranker, _ = _fitted(world, embedding=False)
    later = target_window(graph, start + HORIZON, start + 2 * HORIZON, max_users=1000)
    candidates = ranker.candidates(Counts(log, start + HORIZON, HORIZON), later.users, {})
    scores = ranker.score(candidates).values
    relevant = later.relevant.has(candidates.rows, candidates.items)
    assert relevant.any() and (~relevant).any()
    higher = (scores[relevant].unsqueeze(1) > scores[~relevant].unsqueeze(0)).float().mean()
    assert higher > 0.65  # chance: 0.5; 52 purchases in all


def test_the_same_seed_gives_the_same_scores(world: tuple) -> None:
    (first, window), (second, _) = _fitted(world, True), _fitted(world, True)
    _, log, start = world
    signals = _embedding(log, len(window.users))
    candidates = first.candidates(Counts(log, start, HORIZON), window.users, signals)
    assert torch.equal(first.score(candidates).values, second.score(candidates).values)


def test_a_window_without_relevant_candidates_is_refused(world: tuple) -> None:
    _, log, start = world
    ranker = InterestRanker()
    candidates = ranker.candidates(Counts(log, start, HORIZON), torch.tensor([0, 1]), {})
    nothing = UserItems.from_pairs(torch.zeros(0, dtype=torch.long), torch.zeros(0), 2, 1)
    with pytest.raises(TooFewLabels, match=f"it needs at least {RankerConfig().min_relevant}"):
        ranker.fit(candidates, nothing)


def test_candidates_rank_above_every_other_item_then_by_inner_product() -> None:
    torch.manual_seed(0)
    users = torch.tensor([4, 2])
    vectors = (F.normalize(torch.randn(2, 3), dim=1), F.normalize(torch.randn(6, 3), dim=1))
    pairs = PairScores(
        torch.tensor([0, 0, 1]), torch.tensor([5, 1, 3]), torch.tensor([0.1, 0.7, 0.0])
    )
    scores = RankedRecommender(users, pairs, 6, vectors).score(torch.tensor([2, 4]))
    assert scores[1].argsort(descending=True)[:2].tolist() == [1, 5]
    assert scores[0].argmax().item() == 3
    others = [i for i in range(6) if i != 3]
    expected = (vectors[0][1] @ vectors[1][others].T).argsort(descending=True)
    assert scores[0, others].argsort(descending=True).tolist() == expected.tolist()


def _content(log: FunnelLog, users: int) -> dict[str, InnerProduct]:
    return {"content": _embedding(log, users, seed=1)["embedding"]}


def test_behavioural_signals_are_blind_on_items_without_events(world: tuple) -> None:
    _, log, start = world
    counts, users = Counts(log, start, HORIZON), torch.arange(12)
    signals = {**_embedding(log, len(users)), **_content(log, len(users))}
    candidates = InterestRanker().candidates(counts, users, signals, behavioural=("embedding",))
    eventless = counts.item_eventless[candidates.items.numpy()]
    assert eventless.any() and (~eventless).any()
    embedding, content = candidates.features[:, -4], candidates.features[:, -2]
    assert np.isnan(embedding[eventless]).all() and np.isfinite(embedding[~eventless]).all()
    assert np.isfinite(content).all()  # content describes a new item as it does any other
    width = candidates.features.shape[1]
    assert candidates.blind_at.tolist() == [width - 4, width - 3]


def test_the_fit_shows_a_share_of_items_as_new_to_who_had_not_met_them(world: tuple) -> None:
    _, log, start = world
    counts, users = Counts(log, start, HORIZON), torch.arange(40)
    signals = {**_embedding(log, len(users)), **_content(log, len(users))}
    ranker = InterestRanker(RankerConfig(cold_item_rate=0.5, seed=1))
    candidates = ranker.candidates(counts, users, signals, behavioural=("embedding",))
    shown = ranker.fit_features(candidates)
    changed = _changed_rows(shown, candidates.features)
    assert not changed[candidates.seen].any()  # a user's own item is never new to them
    as_new = shown[changed]
    cold = np.broadcast_to(COLD_ITEM, (len(as_new), len(COLD_ITEM)))
    assert np.array_equal(as_new[:, candidates.items_at], cold, equal_nan=True)
    assert np.isnan(as_new[:, candidates.blind_at]).all()
    content = candidates.features[changed][:, -2:]
    assert np.array_equal(as_new[:, -2:], content, equal_nan=True)  # content kept
    drawn = np.unique(candidates.items.numpy()[changed])
    known = np.unique(candidates.items.numpy()[~counts.item_eventless[candidates.items.numpy()]])
    assert 0.3 < len(np.intersect1d(drawn, known)) / len(known) < 0.7
    unchanged = InterestRanker(RankerConfig(cold_item_rate=0.0)).fit_features(candidates)
    assert np.array_equal(unchanged, candidates.features, equal_nan=True)


def test_an_items_listing_is_read_from_its_row_and_kept_when_it_is_shown_as_new(
    world: tuple,
) -> None:
    """log1p of the days from the product row's own time (`created_at`) to the window's start,
    0 for a product listed later, NaN for one without a time; the fit's disguised new items keep
    it (their counts go); a fit window's candidates leave out the products listed after it;
    `listing=False` does neither."""
    _, log, start = world
    listed = log.item_listed.copy()
    assert (listed > start).any() and (listed < start).any()
    listed[0] = NEVER  # a catalogue row without a time
    counts = Counts(replace(log, item_listed=listed), start, HORIZON)
    users = torch.tensor([0, 5, 9])
    ranker = InterestRanker(RankerConfig(cold_item_rate=0.5, seed=1))
    candidates = ranker.candidates(counts, users, _embedding(log, len(users)), ("embedding",))
    column = listing_columns(log.stages).start
    items = candidates.items.numpy()
    days = np.maximum(start - listed[items], 0) / SECONDS_PER_DAY
    expected = np.where(listed[items] == NEVER, np.nan, np.log1p(days)).astype(np.float32)
    assert np.allclose(candidates.features[:, column], expected, equal_nan=True)
    assert (candidates.features[:, column] == 0).any()  # listed after the start
    shown = ranker.fit_features(candidates)
    as_new = _changed_rows(shown, candidates.features)
    assert as_new.any()
    assert np.array_equal(shown[:, column], candidates.features[:, column], equal_nan=True)
    later = int(np.median(listed[listed != NEVER]))
    fit = ranker.candidates(counts, users, _embedding(log, len(users)), ("embedding",), later)
    assert len(fit.items) and (listed[fit.items.numpy()] < later).all()  # none listed after
    off = InterestRanker(RankerConfig(listing=False))
    blank = off.candidates(counts, users, _embedding(log, len(users)), ("embedding",), later)
    assert np.isnan(blank.features[:, column]).all()
    assert (listed[blank.items.numpy()] >= later).any()  # blind to listing times


def test_the_fit_chooses_its_tree_size_on_held_out_users(world: tuple) -> None:
    """Every size of the grid is scored on held-out users and the best is the one fitted; a grid
    of one size is no choice."""
    graph, log, start = world
    window = target_window(graph, start, start + HORIZON, max_users=1000)
    signals = _embedding(log, len(window.users))
    grids = {"choice": (3, 7, 31), "fixed": (7,)}
    rankers = {}
    for name, grid in grids.items():
        ranker = InterestRanker(RankerConfig(seed=3, min_relevant=5, leaf_grid=grid))
        candidates = ranker.candidates(Counts(log, start, HORIZON), window.users, signals)
        ranker.fit(candidates, window.relevant)
        rankers[name] = ranker
    chosen = rankers["choice"]
    assert set(chosen.held_out_map) == {3, 7, 31}
    assert all(0.0 <= figure <= 1.0 for figure in chosen.held_out_map.values())
    assert chosen.held_out_map[chosen.leaves] == max(chosen.held_out_map.values())
    assert all(fit.max_leaf_nodes == chosen.leaves for fit in chosen.classifiers)
    assert len(chosen.classifiers) == 1 + chosen.config.selection_folds  # the whole and each fold
    fixed = rankers["fixed"]
    assert fixed.leaves == 7 and fixed.held_out_map == {} and len(fixed.classifiers) == 1


def test_cross_fitted_scores_are_the_held_out_fits_of_the_chosen_size(world: tuple) -> None:
    """Each candidate is scored by the chosen size's fit that held its user out: their MAP@10
    per fold gives that size's `held_out_map` back, and ranking the relevant items first (an
    oracle over the candidates) reaches at least every size's figure."""
    graph, log, start = world
    window = target_window(graph, start, start + HORIZON, max_users=1000)
    config = RankerConfig(seed=3, min_relevant=5, leaf_grid=(3, 7))
    ranker = InterestRanker(config)
    candidates = ranker.candidates(Counts(log, start, HORIZON), window.users, {})
    ranker.fit(candidates, window.relevant)
    assert ranker.held_out_folds == [0, 1, 2]
    scores = ranker.cross_fitted(candidates)
    assert np.isfinite(scores).all()
    rows, items = candidates.rows.numpy(), candidates.items.numpy()
    fold = ranker.fold_of_user[rows]
    per_fold = [
        candidate_ap(
            rows[fold == k],
            items[fold == k],
            scores[fold == k],
            window.relevant,
            np.flatnonzero(ranker.fold_of_user == k),
            10,
        ).mean()
        for k in ranker.held_out_folds
    ]
    assert np.mean(per_fold) == pytest.approx(ranker.held_out_map[ranker.leaves])
    every = np.arange(len(window.users))
    oracle = window.relevant.has(candidates.rows, candidates.items).numpy().astype(float)
    best = candidate_ap(rows, items, oracle, window.relevant, every, 10)
    assert len(best) == int((window.relevant.counts() > 0).sum())
    assert best.mean() >= candidate_ap(rows, items, scores, window.relevant, every, 10).mean()


def test_a_shallower_stage_widens_the_window_and_its_labels(world: tuple) -> None:
    """With the stage above the target, the window holds every target user and item and more."""
    graph, _, start = world
    target = target_window(graph, start, start + HORIZON, max_users=1000)
    wider = target_window(graph, start, start + HORIZON, max_users=1000, stages=2)
    assert set(target.users.tolist()) < set(wider.users.tolist())
    own = window_items(graph, wider.users, start, start + HORIZON)  # their target items
    row = {user: r for r, user in enumerate(wider.users.tolist())}
    for r, user in enumerate(target.users.tolist()):
        items = set(target.relevant.rows(r, r + 1)[1].tolist())
        assert items == set(own.rows(row[user], row[user] + 1)[1].tolist())
        assert items <= set(wider.relevant.rows(row[user], row[user] + 1)[1].tolist())
    assert wider.relevant.counts().sum() > own.counts().sum()


def test_a_feature_without_a_single_value_is_no_error(world: tuple) -> None:
    """A feature can be undefined on every candidate (no re-buyer of any item: no re-buy
    share); scikit-learn's binning fails on such a column, so the fit sets it aside."""
    graph, log, start = world
    window = target_window(graph, start, start + HORIZON, max_users=1000)
    ranker = InterestRanker(RankerConfig(seed=3, min_relevant=5, leaf_grid=(3, 7)))
    candidates = ranker.candidates(Counts(log, start, HORIZON), window.users, {})
    candidates.features[:, candidates.items_at.start + 3] = np.nan  # item_rebuy_share
    ranker.fit(candidates, window.relevant)
    scores = ranker.score(candidates).values
    assert torch.isfinite(scores).all() and scores.std() > 0
