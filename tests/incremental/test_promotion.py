"""Retraining: a retrain is promoted only if its evaluation beats popularity and is not worse than
the serving model's, and a promoted tree keeps the token ids of the interests that kept their
meaning."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
import torch
from mlflow.tracking import MlflowClient

from assets.definitions import defs
from assets.promotion import RUN_TAG, promotion_checks
from hier_pipeline.evaluation.compare import Comparison, evaluate_models
from hier_pipeline.evaluation.report import GATE, OURS, SERVED, EvaluationReport
from hier_pipeline.graph import default_split
from hier_pipeline.interests.artifact import (
    HierarchyArtifact,
    TokensArtifact,
    load_hierarchy,
    save_hierarchy,
)
from hier_pipeline.interests.build import build_interest_tokens
from hier_pipeline.interests.hierarchy import (
    InterestHierarchy,
    token_ids,
)
from hier_pipeline.interests.index import InterestIndex
from hier_pipeline.interests.matching import stable_token_ids
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.model.artifact import ModelArtifact, load_sampling, save_model
from hier_pipeline.release.promotion import PromotionConfig, promote
from hier_pipeline.release.serving import serving_folder
from resources import DatasetResource, MLflowResource, StorageResource
from tests.incremental.conftest import Base
from tests.interests.conftest import TINY, HandedOver

# An evaluation our model passes: it beats the gate baseline.
PASSING = {OURS: {"map@10": 0.1}, GATE: {"map@10": 0.0}}


@dataclass(frozen=True)
class Retrain:
    model: ModelArtifact
    report: EvaluationReport


def _evaluate(base: Base, model: torch.nn.Module) -> EvaluationReport:
    """The evaluation's protocol on a window long enough at this size to hold warm users."""
    comparison = Comparison(
        models={OURS: model},
        sampling=TINY.neighbourhoods(len(base.graph.metadata.stages)),
        views=(SERVED,),
        baselines=("popularity",),
    )
    split = default_split(base.graph, train=0.5, validate=0.1)
    return evaluate_models(base.spec.name, base.graph, base.content, split, comparison)


@pytest.fixture(scope="module")
def retrains(base: Base, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Retrain]:
    """The trained model, and a retrain gone wrong (its weights randomised), each evaluated."""
    folder = tmp_path_factory.mktemp("retrains")
    broken = copy.deepcopy(base.trained)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in broken.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    save_model(broken, folder / "broken.pt", load_sampling(base.model))
    return {
        "good": Retrain(ModelArtifact(base.model, 0, {}, [], {}), _evaluate(base, base.trained)),
        "worse": Retrain(
            ModelArtifact(folder / "broken.pt", 0, {}, [], {}), _evaluate(base, broken)
        ),
    }


def _promote(
    base: Base, home: Path, retrain: Retrain, tokens: TokensArtifact
) -> dg.ExecuteInProcessResult:
    upstream = {
        "interest_model": retrain.model,
        "interest_tokens": tokens,
        "evaluation_report": retrain.report,
    }
    return dg.materialize(
        [
            defs.get_assets_def("promoted_interests"),
            promotion_checks,
            *(dg.AssetSpec(name) for name in upstream),
        ],
        resources={
            "dataset": DatasetResource(source=str(base.spec.root)),
            "storage": StorageResource(root=str(home)),
            "mlflow": MLflowResource(
                tracking_uri=f"sqlite:///{home / 'mlflow.db'}", experiment="tests"
            ),
            "io_manager": dg.IOManagerDefinition.hardcoded_io_manager(HandedOver(upstream)),
        },
        instance=dg.DagsterInstance.ephemeral(),
    )


def test_a_worse_retrain_is_not_promoted_and_the_run_is_marked(
    base: Base, retrains: dict[str, Retrain], tmp_path: Path
) -> None:
    good, worse = retrains["good"], retrains["worse"]
    tolerance = PromotionConfig().tolerance
    assert worse.report.models[SERVED]["map@10"] < good.report.models[SERVED]["map@10"] - tolerance
    first = _promote(base, tmp_path, good, base.tokens)
    assert first.success
    served = first.output_for_node("promoted_interests")
    assert served.promoted and served.current is None
    assert first.dagster_run.tags[RUN_TAG] == "promoted"
    files = {p.name: p.read_bytes() for p in served.folder.iterdir() if p.is_file()}
    assert files["model.pt"] == base.model.read_bytes()

    second = _promote(base, tmp_path, worse, base.tokens)
    assert second.success  # the run goes on; the gate keeps the old model and says so
    kept = second.output_for_node("promoted_interests")
    assert not kept.promoted and kept.folder == served.folder
    assert kept.current == pytest.approx(good.report.models[SERVED]["map@10"])
    assert {p.name: p.read_bytes() for p in kept.folder.iterdir() if p.is_file()} == files
    assert second.dagster_run.tags[RUN_TAG] == "kept_previous"
    (check,) = second.get_asset_check_evaluations()
    assert check.check_name == "not_worse_than_serving" and not check.passed
    assert check.severity == dg.AssetCheckSeverity.WARN
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs(
        [client.get_experiment_by_name("tests").experiment_id], order_by=["start_time ASC"]
    )
    assert [r.data.tags["promotion"] for r in runs] == ["promoted", "kept_previous"]
    manifest = json.loads((kept.folder / "manifest.json").read_text())
    assert manifest["metrics"]["map@10"] == pytest.approx(good.report.models[SERVED]["map@10"])


def test_a_retrain_that_loses_to_popularity_is_not_promoted_with_nothing_serving(
    base: Base, retrains: dict[str, Retrain], tmp_path: Path
) -> None:
    """The release asset run alone (no blocking check upstream) refuses it by itself."""
    worse = retrains["worse"].report.models
    assert worse[SERVED]["map@10"] < worse["popularity"]["map@10"]
    result = _promote(base, tmp_path, retrains["worse"], base.tokens)
    outcome = result.output_for_node("promoted_interests")
    assert not outcome.promoted and outcome.current is None
    assert outcome.reason.startswith("does not beat popularity: map@10 ")
    assert not outcome.folder.exists()
    assert result.dagster_run.tags[RUN_TAG] == "kept_previous"


def test_token_ids_survive_a_retrain_on_unchanged_data(base: Base, tmp_path: Path) -> None:
    """The retrain finds the same interests but lists them in another order (its tree is the
    served one reordered): every item keeps every token id, in the bags served after it."""
    served = promote(PASSING, base.model, base.tokens, tmp_path / "served", PromotionConfig(), {})
    before = InterestIndex.open(served.folder)
    artifact = base.tokens.load()
    tree = load_hierarchy(artifact.hierarchy)
    regrown = tmp_path / "regrown"
    supergraph = HierarchyArtifact(artifact.hierarchy, (), [], []).supergraph()
    hierarchy = save_hierarchy(_reverse_level0(tree), supergraph, regrown / "hierarchy.pt", [], [])
    tokens = build_interest_tokens(
        base.embeddings, hierarchy, base.spec, base.raw.database, regrown, TokenConfig()
    )
    assert InterestIndex.open(regrown).hierarchy.token_ids != tree.token_ids  # ids did move
    again = promote(PASSING, base.model, tokens, served.folder, PromotionConfig(), {})
    assert again.promoted and again.ids_kept == again.ids == len(tree.token_ids)
    after = InterestIndex.open(again.folder)
    for key in before.keys["products"]:
        assert {i.token for i in after.interests_of("item", key)} == {
            i.token for i in before.interests_of("item", key)
        }


def test_a_reordered_tree_gets_its_old_ids_back(base: Base) -> None:
    tree = load_hierarchy(base.tokens.load().hierarchy)
    keys = base.tokens.load().keys[base.spec.roles.item]
    reordered = _reverse_level0(tree)
    assert reordered.token_ids != tree.token_ids
    assert stable_token_ids(tree, keys, reordered, keys) == [
        tree.token_ids[int(t)] for t in _reverse_order(tree)
    ]


def _reverse_order(tree: InterestHierarchy) -> torch.Tensor:
    """Old primitive index at each position of the tree with its level-0 order reversed."""
    order = torch.arange(len(tree.parent))
    level0 = tree.level(0)
    order[level0] = order[level0].flip(0)
    return order


def _reverse_level0(tree: InterestHierarchy) -> InterestHierarchy:
    """The same tree (same items under every primitive) with its level-0 primitives listed in
    reverse order: the ids `token_ids` derives from positions all change."""
    order = _reverse_order(tree)
    position = torch.argsort(order)  # old index -> new index
    parent = torch.where(tree.parent[order] >= 0, position[tree.parent[order].clamp_min(0)], -1)
    return InterestHierarchy(
        tree.centroids[order],
        parent,
        tree.offsets,
        token_ids(parent, tree.offsets),
        position[tree.members],
    )


@pytest.mark.parametrize(
    ("models", "reason"),
    [
        ({OURS: {"map@10": 0.02}, GATE: {"map@10": 0.05}}, "does not beat popularity"),
        ({OURS: {"map@10": 0.05}, GATE: {"map@10": 0.05}}, "does not beat popularity"),
        ({OURS: {"map@10": 0.05}, "ease": {"map@10": 0.01}}, "did not score popularity"),
        # the ranked row beats it, the served model's own score does not: the latter decides
        (
            {OURS: {"map@10": 0.2}, SERVED: {"map@10": 0.01}, GATE: {"map@10": 0.05}},
            "does not beat popularity: map@10 0.0100",
        ),
    ],
)
def test_nothing_serving_still_serves_no_model_that_fails_the_gate(
    base: Base, tmp_path: Path, models: dict, reason: str
) -> None:
    """Run alone (no blocking check upstream) with nothing served yet, the release refuses a model
    that loses or ties to popularity, or that was never compared with it."""
    folder = serving_folder(tmp_path, base.spec.name)
    outcome = promote(models, base.model, base.tokens, folder, PromotionConfig(), {})
    assert not outcome.promoted and outcome.current is None
    assert reason in outcome.reason
    assert not folder.exists()
