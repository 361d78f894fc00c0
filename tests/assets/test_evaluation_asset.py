"""The evaluation stage in Dagster: the report asset with its checks, MLflow run and UI page, and
the gate that serves a model only when it beats popularity."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import torch
from mlflow.tracking import MlflowClient

from assets.definitions import defs
from assets.evaluation import evaluation_report_checks
from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.dataset import load_dataset, parse_dataset
from hier_pipeline.evaluation.report import SERVED
from hier_pipeline.graph import GraphArtifact, default_split
from hier_pipeline.interests.index import InterestIndex
from hier_pipeline.model.artifact import ModelArtifact, save_model
from hier_pipeline.pipeline.chain import (
    CONTENT_FILE,
    GRAPH_FILE,
    MODEL_FILE,
    ChainConfig,
    run_chain,
)
from hier_pipeline.pipeline.prepare import Prepared
from resources import DatasetResource, MLflowResource, StorageResource
from tests.interests.conftest import TINY, HandedOver

# TINY as launchpad knobs: the architecture the asset checks the handed-over model against.
TINY_KNOBS = {"epochs": 3, "steps_per_epoch": 4, "batch_size": 64, "dim": 32, "num_primitives": 8}


@dataclass(frozen=True)
class Upstream:
    folder: Path  # the dataset
    values: dict[str, Any]  # asset name -> the value its materialisation returned
    model: torch.nn.Module


@pytest.fixture(scope="module")
def upstream(
    synthetic_world: Path, synthetic_pipeline: tuple, tmp_path_factory: pytest.TempPathFactory
) -> Upstream:
    """Every input of evaluation_report, built by the core functions the assets call. The split
    leaves the last 40% of purchases after t1 (the default 15% holds 4 warm users at this size)."""
    graph, content, _ = synthetic_pipeline
    split = default_split(graph, train=0.5, validate=0.1)
    folder = tmp_path_factory.mktemp("upstream")
    spec = parse_dataset(synthetic_world)
    raw = load_dataset(spec, folder / "warehouse.duckdb")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        done = run_chain(
            Prepared(spec, graph, content, split, raw.database), folder, ChainConfig(train=TINY)
        )
    finally:
        torch.set_num_threads(threads)
    trained = done.trained.result
    values = {
        "raw_tables": raw,
        "relational_graph": GraphArtifact.describe(graph, folder / GRAPH_FILE, split),
        "content_embeddings": ContentArtifact(folder / CONTENT_FILE),
        "interest_model": ModelArtifact(
            folder / MODEL_FILE, trained.best_epoch, {}, trained.history, {}
        ),
        "interest_hierarchy": done.hierarchy,
        "interest_tokens": done.tokens,
    }
    return Upstream(synthetic_world, values, trained.model)


def evaluate(
    upstream: Upstream, home: Path, config: dict[str, Any], model: ModelArtifact | None = None
) -> dg.ExecuteInProcessResult:
    """Materialise evaluation_report, its checks and the release (promoted_interests) on the
    handed-over inputs."""
    values = dict(upstream.values)
    if model is not None:
        values["interest_model"] = model
    return dg.materialize(
        [
            defs.get_assets_def("evaluation_report"),
            defs.get_assets_def("promoted_interests"),
            evaluation_report_checks,
            *(dg.AssetSpec(name) for name in upstream.values),
        ],
        resources={
            "dataset": DatasetResource(source=str(upstream.folder)),
            "storage": StorageResource(root=str(home)),
            "mlflow": MLflowResource(
                tracking_uri=f"sqlite:///{home / 'mlflow.db'}", experiment="tests"
            ),
            "io_manager": dg.IOManagerDefinition.hardcoded_io_manager(HandedOver(values)),
        },
        run_config={"ops": {"evaluation_report": {"config": {**TINY_KNOBS, **config}}}},
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )


def checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_report_checks_mlflow_and_release(upstream: Upstream, tmp_path: Path) -> None:
    result = evaluate(
        upstream,
        tmp_path,
        {
            "ablations": ["hier_no_distill", "hier_content_only"],
            "baselines": ["popularity", "itemknn"],
            "baseline_steps": 1,
        },
    )
    assert result.success
    report = result.output_for_node("evaluation_report")
    assert list(report.models) == [
        "popularity",
        "itemknn",
        "hier",
        "hier_no_distill",
        "hier_content_only",
        SERVED,  # always scored: the gate judges the served model's own score
        "hier_tokens",
    ]
    evaluations = checks(result)
    assert evaluations["beats_popularity"].passed
    gate = evaluations["beats_popularity"].metadata
    assert gate[f"{SERVED}_map@10"].value == round(report.models[SERVED]["map@10"], 4)
    assert evaluations["beats_every_baseline"].passed == report.beats("itemknn")

    (materialised,) = result.asset_materializations_for_node("evaluation_report")
    page = materialised.metadata["report"].value
    for section in ("## Target-stage retrieval", "## Interest hierarchy", "## Training"):
        assert section in page
    assert page.count("](data:image/png;base64,") == 4 and ".png)" not in page
    folder = tmp_path / "evaluation" / "synthetic_ads"
    written = json.loads((folder / "metrics.json").read_text())
    assert written["models"]["hier"]["map@10"] == pytest.approx(report.models["hier"]["map@10"])
    assert all(level["nmi"] is not None for level in written["hierarchy"]["levels"])

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs(
        [client.get_experiment_by_name("tests").experiment_id],
        "tags.stage = 'evaluation_report'",
    )
    assert run.info.status == "FINISHED"
    assert run.data.metrics["eval/hier/map_at_10"] == pytest.approx(report.models["hier"]["map@10"])
    assert "eval/hierarchy/L0/nmi" in run.data.metrics
    curve = client.get_metric_history(run.info.run_id, "hier_no_distill/loss/total")
    assert [m.step for m in curve] == list(range(len(curve))) and curve
    artifacts = {Path(a.path).name for a in client.list_artifacts(run.info.run_id, "report")}
    assert {"report.md", "metrics.json", "recall_at_k.png", "training_curve.png"} <= artifacts

    served = tmp_path / "serving" / "synthetic_ads"
    manifest = json.loads((served / "manifest.json").read_text())
    assert manifest["models"]["hier"]["map@10"] == written["models"]["hier"]["map@10"]
    index = InterestIndex.open(served)
    user = index.keys["users"][0]
    assert len(index.top_items(user, 5)) == 5


def test_a_randomised_model_fails_the_gate_and_serves_nothing(
    upstream: Upstream, tmp_path: Path
) -> None:
    broken = copy.deepcopy(upstream.model)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in broken.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    save_model(broken, tmp_path / "broken.pt", upstream.values["interest_model"].sampling())
    model = replace(upstream.values["interest_model"], path=tmp_path / "broken.pt")
    result = evaluate(upstream, tmp_path, {"ablations": [], "baselines": ["popularity"]}, model)
    assert not result.success
    evaluations = checks(result)
    assert not evaluations["beats_popularity"].passed
    assert evaluations["beats_popularity"].severity == dg.AssetCheckSeverity.ERROR
    report = result.output_for_node("evaluation_report")
    assert report.models[SERVED]["map@10"] < report.models["popularity"]["map@10"]
    assert not result.asset_materializations_for_node("promoted_interests")
    assert not (tmp_path / "serving").exists()


@pytest.mark.parametrize(
    ("knobs", "reason"),
    [
        ({"dim": 16}, "another architecture than interest_model's"),
        ({"target_fanouts": [16, 4]}, "other neighbourhoods than interest_model's"),
    ],
)
def test_training_knobs_other_than_the_models_are_refused(
    upstream: Upstream, tmp_path: Path, knobs: dict[str, Any], reason: str
) -> None:
    """The trained ablations must differ from the served model in one idea only."""
    result = evaluate(upstream, tmp_path, {**knobs, "ablations": [], "baselines": []})
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert reason in str(failure.event_specific_data)
