"""Our model, its ablations and baselines on one window of the tiny synthetic world."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from hier_pipeline.dataset import load_dataset, parse_dataset
from hier_pipeline.evaluation.ablations import (
    ABLATIONS,
    COUNTS_ONLY,
    NO_COLD_ITEMS,
    NO_RANKER,
    NO_REPRESENTATION,
    TRAINED,
    VIEWS,
    WITH_CONTENT_POPULARITY,
    ablation_sampling,
    same_architecture,
    train_ablations,
)
from hier_pipeline.evaluation.baselines import FitBudget, Interactions, warm_window
from hier_pipeline.evaluation.compare import (
    TOKENS,
    Comparison,
    HierarchyInputs,
    data_end,
    evaluate_models,
)
from hier_pipeline.evaluation.interest_recommender import AsOf
from hier_pipeline.evaluation.ours import OurModels
from hier_pipeline.evaluation.report import EvaluationReport
from hier_pipeline.evaluation.truth import item_truth
from hier_pipeline.graph import default_split
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.sampler import SamplerConfig, StageFanouts
from hier_pipeline.graph.split import TemporalSplit
from hier_pipeline.interests.hierarchy import HierarchyConfig, build_hierarchy
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.model.embeddings import embed_entities
from hier_pipeline.model.factory import GraphEncoder
from hier_pipeline.model.history import InteractionHistory
from hier_pipeline.model.infer import history_scores
from hier_pipeline.model.train import train_model
from hier_pipeline.ranker.ranker import RankerConfig
from hier_pipeline.ranking.metrics import evaluate_embeddings
from hier_pipeline.ranking.window import target_window
from hier_pipeline.tracking import flatten_params
from tests.interests.conftest import TINY

BASELINE_NAMES = ("popularity", "repeat", "itemknn")


def served(graph: RelationalGraph) -> SamplerConfig:
    """The tiny config's neighbourhoods, as the evaluation embeds with them."""
    return TINY.neighbourhoods(len(graph.metadata.stages))


@dataclass(frozen=True)
class Compared:
    graph: RelationalGraph
    content: dict
    split: TemporalSplit
    model: GraphEncoder
    report: EvaluationReport
    hierarchy: HierarchyInputs
    comparison: Comparison


@pytest.fixture(scope="module")
def compared(
    synthetic_world: Path, synthetic_pipeline: tuple, tmp_path_factory: pytest.TempPathFactory
) -> Compared:
    """Trained on the first half of the purchases, validated on the next tenth: the tiny world's
    last 15% hold 4 warm users, too few to tell models apart; 40% hold 13."""
    graph, content, _ = synthetic_pipeline
    split = default_split(graph, train=0.5, validate=0.1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trained = train_model(graph, content, split, TINY)
        ablations = train_ablations(graph, content, split, TINY, ABLATIONS)
        folder = tmp_path_factory.mktemp("compare")
        vectors = embed_entities(trained.model, graph, content, folder / "e.pt", served(graph))
        items = vectors.load()[graph.metadata.item_type]
        spec = parse_dataset(synthetic_world)
        database = load_dataset(spec, folder / "db.duckdb").database
        hierarchy = HierarchyInputs(
            build_hierarchy(items, HierarchyConfig()),
            TokenConfig(),
            [{"ari": 0.5, "nmi": 0.6}, {"ari": 0.25, "nmi": 0.4}, {"ari": 0.0, "nmi": 0.3}],
            item_truth(synthetic_world, spec, database),
        )
        comparison = Comparison(
            models={"hier": trained.model, **{n: r.model for n, r in ablations.items()}},
            sampling=served(graph),
            model_sampling=ablation_sampling(TINY, ABLATIONS, len(graph.metadata.stages)),
            history=trained.history,
            baselines=BASELINE_NAMES,
            budget=FitBudget(steps=1),
        )
        report = evaluate_models("tiny", graph, content, split, comparison, hierarchy)
    finally:
        torch.set_num_threads(threads)
    return Compared(graph, content, split, trained.model, report, hierarchy, comparison)


def test_every_model_is_scored_on_the_window_after_validation(compared: Compared) -> None:
    report = compared.report
    assert list(report.models) == [*BASELINE_NAMES, "hier", *ABLATIONS, TOKENS]
    assert (report.t1, report.t2) == (compared.split.t1, compared.split.t2)
    assert report.end == data_end(compared.graph) > report.t2
    assert report.users >= 10
    keys = set(report.models["popularity"])
    for name, metrics in report.models.items():
        assert set(metrics) == keys, name
        assert all(0.0 <= v <= 1.0 for k, v in metrics.items() if not k.startswith("cold")), name
    trained = {"hier", *TRAINED}  # how each of our models is ranked, beside the tuned baselines
    assert report.history and report.settings.keys() == {*BASELINE_NAMES, *trained}


def test_every_figure_carries_its_interval_and_its_segments(compared: Compared) -> None:
    """Intervals hold their point figure, each baseline has ours-minus-it with an interval around
    the difference of the two point figures, and the segments tell replay from exploration: the
    buy-again baseline fills its top 50 from history first and finds nothing new to a user."""
    report = compared.report
    for name, metrics in report.models.items():
        for metric, (low, high) in report.intervals[name].items():
            assert low <= metrics[metric] <= high, (name, metric)
        assert 0.0 <= metrics["history_share@50"] <= 1.0, name
    assert set(report.versus) == set(BASELINE_NAMES)
    # one seed here: the first seed is `hier`, with every view and trained ablation beside it
    assert set(report.versus_ablations) == {*VIEWS, *TRAINED}
    for baseline, differences in {**report.versus, **report.versus_ablations}.items():
        for metric, found in differences.items():
            point = report.models["hier"][metric] - report.models[baseline][metric]
            assert found.diff == pytest.approx(point, abs=1e-6)
            assert found.low <= found.diff <= found.high
    segments = report.segments
    assert set(segments) == {"repeat", "explore", "warm_users", "cold_users", "all_users"}
    assert segments["repeat"].keys() == report.models.keys()
    assert segments["cold_users"].keys() == {"hier", *BASELINE_NAMES}
    for name, warm in segments["warm_users"].items():
        assert warm == {m: report.models[name][m] for m in ("map@10", "recall@50")}
        cold, both = segments["cold_users"][name], segments["all_users"][name]
        for metric, value in both.items():
            if report.cold_users_evaluated == 0:
                assert value == pytest.approx(warm[metric])
            else:  # a weighted mean of the two groups
                low, high = sorted((warm[metric], cold[metric]))
                assert low - 1e-6 <= value <= high + 1e-6, (name, metric)
    for name in BASELINE_NAMES:  # a baseline serves cold users the popularity list
        assert segments["cold_users"][name] == segments["cold_users"]["popularity"]
    share = {name: report.models[name]["history_share@50"] for name in BASELINE_NAMES}
    assert share["repeat"] > share["popularity"]
    repeat = report.segments["repeat"]
    assert all(repeat["repeat"]["recall@50"] >= repeat[n]["recall@50"] for n in BASELINE_NAMES)


def test_our_own_score_is_the_full_ranking_of_the_model_as_of_t2(compared: Compared) -> None:
    """`hier_no_ranker`, recomputed along another path (topk_in_chunks with PairScores, no
    tie-break): the same window, users, exclusion rule, history term and figures."""
    graph, report, t2 = compared.graph, compared.report, compared.split.t2
    history = Interactions.from_graph(graph, t2)
    window = warm_window(graph, history, t2, report.end, max_users=1000)
    embed = AsOf(compared.model, graph, compared.content, served(graph), t2)
    users = embed(graph.metadata.user_type, window.users)
    items = embed(graph.metadata.item_type, torch.arange(graph.data["products"].num_nodes))
    exclude = history.target_items(window.users) if report.exclude_seen else None
    pairs = history_scores(compared.model, InteractionHistory.of(graph), window.users, t2)
    assert pairs is not None  # the model scores a user's own earlier items too
    expected = evaluate_embeddings(users, items, window.relevant, (10, 50), exclude, 1024, pairs)
    assert len(window.users) == report.users
    for metric in ("map@10", "ndcg@10", "recall@50"):
        assert report.models[NO_RANKER][metric] == pytest.approx(expected[metric], abs=1e-6)


def _randomised(model: GraphEncoder) -> GraphEncoder:
    """`model` with every weight drawn at random (seeded): a model that learned nothing."""
    broken = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in broken.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    return broken


def _evaluated(
    compared: Compared, model: GraphEncoder, floor: int, listing: bool = True
) -> EvaluationReport:
    """`model` as our row against popularity, with the ranker's floor of relevant pairs (and
    whether it reads the listing times)."""
    comparison = Comparison(
        models={"hier": model},
        sampling=served(compared.graph),
        views=(NO_RANKER,),
        baselines=("popularity",),
        ranker=RankerConfig(min_relevant=floor, listing=listing),
    )
    return evaluate_models("tiny", compared.graph, compared.content, compared.split, comparison)


def test_a_sparse_target_is_ranked_from_shallower_stages_judged_on_its_own_events(
    compared: Compared,
) -> None:
    """The tiny world's fit window holds 5 relevant purchase pairs, below the ranker's floor: the
    stages above stand in, one more at a time, until the floor is reached (click or deeper: 29
    pairs), and the window's users' own purchases judge that ranker against the model's own
    score; the better serves: the trained model's own score against a ranker blind to the
    products' listing times, and the ranker where the model is a random one. Where no stage
    leaves enough, the own score serves."""
    stages = compared.graph.metadata.stages
    floor = RankerConfig().min_relevant
    unlisted = _evaluated(compared, compared.model, floor, listing=False)
    randomised = _evaluated(compared, _randomised(compared.model), floor)
    for outcome, ranked in ((unlisted, False), (randomised, True)):
        setting = outcome.settings["hier"]
        assert setting["labels"] == stages[-3:]
        assert setting["relevant"] >= RankerConfig().min_relevant
        judged = setting["held_out_target_map"]
        assert judged["users"] >= 1
        assert (judged["ranker"] > judged["own_score"]) == ranked
        assert (setting["ranker"] == "fitted") == ranked
        assert setting["ranker"].startswith("none, own score") != ranked
        assert (outcome.models["hier"] != outcome.models[NO_RANKER]) == ranked
    nothing = _evaluated(compared, compared.model, 10**6)
    assert nothing.settings["hier"]["ranker"].startswith("none, own score")
    assert "labels" not in nothing.settings["hier"]
    assert nothing.models["hier"] == nothing.models[NO_RANKER] == compared.report.models[NO_RANKER]


def test_where_the_fit_window_allows_a_ranker_it_ranks_our_row(compared: Compared) -> None:
    """With the floor of relevant pairs lowered to what the tiny world holds: our row and the
    ranker's views are the ranker's, fitted on [t1, t2), not the model's own score."""
    comparison = Comparison(
        models={"hier": compared.model},
        sampling=served(compared.graph),
        views=(NO_RANKER, COUNTS_ONLY, NO_REPRESENTATION, NO_COLD_ITEMS, WITH_CONTENT_POPULARITY),
        baselines=("popularity",),
        ranker=RankerConfig(min_relevant=1),
    )
    graph, split = compared.graph, compared.split
    report = evaluate_models("tiny", graph, compared.content, split, comparison)
    setting = report.settings["hier"]
    assert setting == {
        "ranker": "fitted",
        "labels": [compared.graph.metadata.stages[-1]],  # the target stage alone
        "relevant": setting["relevant"],
        "leaves": setting["leaves"],
        "held_out_map": setting["held_out_map"],
        "paths": ["path:events>campaigns>advertisers"],  # the relational paths it read
        "fit_window": [split.t1, split.t2],
    }
    assert setting["relevant"] >= 1
    assert set(setting["held_out_map"]) == set(RankerConfig().leaf_grid)
    assert setting["held_out_map"][setting["leaves"]] == max(setting["held_out_map"].values())
    assert report.models[NO_RANKER] == compared.report.models[NO_RANKER]
    assert report.models["hier"] != report.models[NO_RANKER]
    assert report.models[COUNTS_ONLY] != report.models["hier"]
    # each ranker view sees other signals or other fit features: each ranks on its own
    views = (COUNTS_ONLY, NO_REPRESENTATION, NO_COLD_ITEMS, WITH_CONTENT_POPULARITY)
    rows = [report.models[name] for name in views]
    assert all(
        row != other for row in rows for other in [*rows, report.models["hier"]] if row is not other
    )


def test_each_ablation_differs_from_the_full_config_in_its_switch_only() -> None:
    full = flatten_params(asdict(TINY))
    changed = {
        name: {k for k, v in flatten_params(asdict(ablate(TINY))).items() if full[k] != v}
        for name, ablate in TRAINED.items()
    }
    biases = {k for k in full if k.startswith("model.attention.use_")}
    assert changed == {
        "hier_no_bias": biases,
        "hier_no_primitives": {"model.use_primitives"},
        "hier_no_distill": {"use_distillation"},
        "hier_no_history": {"model.use_history_bias"},
        "hier_explore_embedding": {"explore_embedding_loss"},
        "hier_target_fanouts": {"target_fanouts"},
        "hier_temporal_messages": {"model.attention.temporal_messages"},
    }
    assert len(biases) == 5
    # The one that samples otherwise is embedded as it was trained, the others as `hier`.
    (name, sampling), *others = ablation_sampling(TINY, list(TRAINED), 4).items()
    assert name == "hier_target_fanouts" and not others
    assert sampling.stage == StageFanouts(3, (4 * TINY.fanouts[0], *TINY.fanouts[1:]))


def test_ablations_are_trained_models_of_their_own(compared: Compared) -> None:
    report = compared.report
    assert report.models["hier_no_bias"] != report.models["hier"]
    assert not same_architecture(compared.model.config, TRAINED["hier_no_bias"](TINY))
    assert same_architecture(compared.model.config, TINY)


def test_a_randomised_model_loses_to_popularity_where_the_trained_one_wins(
    compared: Compared,
) -> None:
    """Scored by its own score: a ranker fitted on the window's counts ranks well whatever the
    model's weights (the ranker views measure what the model adds to it)."""
    report = _evaluated(compared, _randomised(compared.model), 10**6)
    assert report.settings["hier"]["ranker"].startswith("none, own score")
    assert compared.report.beats("popularity")
    assert not report.beats("popularity")
    assert report.models["popularity"] == compared.report.models["popularity"]


def test_hierarchy_scores_against_the_planted_truth(compared: Compared) -> None:
    scores, tree = compared.report.hierarchy, compared.hierarchy.tree
    assert scores is not None
    assert [level.size for level in scores.levels] == list(tree.primitives_per_level())
    assert all(level.nmi is not None and 0.0 < level.nmi <= 1.0 for level in scores.levels)
    assert scores.token_recall_at_50 == compared.report.models[TOKENS]["recall@50"]
    assert scores.embedding_recall_at_50 == compared.report.models["hier"]["recall@50"]
    assert scores.stability_ari == pytest.approx(0.25)
    assert isinstance(compared.hierarchy.truth, np.ndarray)
    assert compared.hierarchy.truth.shape == (len(tree.members), 3)


def test_a_trained_ablation_is_forgotten_once_ranked(compared: Compared) -> None:
    """Its row is the last thing that reads its embeddings, tree and ranker, and the samplers of
    a sampling only it used: they go, the full model's stay (the views and cold users read
    them)."""
    graph, split = compared.graph, compared.split
    ours = OurModels(
        graph, compared.content, compared.comparison, split.t2, split.t2 - split.t1, None
    )
    window = target_window(graph, split.t2, data_end(graph), 5000)
    fitted = ours.fitted()
    full, apart = fitted["hier"](window), fitted["hier_target_fanouts"](window)
    assert torch.equal(full.score(window.users[:3]), fitted["hier"](window).score(window.users[:3]))
    assert apart.score(window.users[:3]).shape == (3, graph.data["products"].num_nodes)
    caches = (ours._vectors, ours._items, ours._trees, ours._rankers)
    assert all(key[0] != "hier_target_fanouts" for cache in caches for key in cache)
    assert any(key[0] == "hier" for key in ours._vectors)
    samplings = {sampling for _, sampling in ours._embedders}
    assert samplings == {compared.comparison.sampling}
