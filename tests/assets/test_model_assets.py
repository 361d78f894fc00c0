"""The model stage end to end: ingest -> graph + content -> trained model -> entity embeddings."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from hier_pipeline.graph.sampler import StageFanouts
from tests.assets.materialise import materialise

TINY_TRAINING = {
    "epochs": 3,
    "steps_per_epoch": 6,
    "batch_size": 64,
    "dim": 32,
    "num_primitives": 8,
}


def test_model_and_embeddings_materialise_with_checks(
    synthetic_world: Path, tmp_path: Path
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = materialise(
        [
            "raw_tables",
            "relational_graph",
            "content_embeddings",
            "interest_model",
            "entity_embeddings",
        ],
        synthetic_world,
        tmp_path,
        # The target stage drawn apart: the embeddings and the registered pyfunc must sample as
        # the model trained, which only the model file knows (entity_embeddings takes no config).
        run_config={
            "ops": {"interest_model": {"config": {**TINY_TRAINING, "target_fanouts": [16, 4]}}}
        },
    )
    assert result.success
    evaluations = {
        (e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()
    }
    assert evaluations["interest_model", "training_loss_decreased"].passed
    assert evaluations["entity_embeddings", "no_nan"].passed
    model = result.output_for_node("interest_model")
    stages = len(result.output_for_node("relational_graph").load().metadata.stages)
    assert model.sampling().stage == StageFanouts(stages - 1, (16, 4))
    run = MlflowClient(tracking_uri=uri).get_run(model.run_id)
    assert run.info.status == "FINISHED"
    assert (
        "val/map_at_10" in run.data.metrics and "baseline/popularity/map_at_10" in run.data.metrics
    )
    assert len(
        MlflowClient(tracking_uri=uri).get_metric_history(model.run_id, "loss/total")
    ) == len(model.history)
    embeddings = result.output_for_node("entity_embeddings")
    vectors = embeddings.load()
    _registered_model_serves_the_same_embeddings(uri, vectors["products"][:5])
    graph = result.output_for_node("relational_graph").load()
    assert set(vectors) == {"users", "advertisers", "products"}
    for node_type, values in vectors.items():
        assert values.shape == (graph.data[node_type].num_nodes, 32)
        assert torch.allclose(values.norm(dim=1), torch.ones(len(values)), atol=1e-4)
    cold = graph.data["products"].time >= result.output_for_node("relational_graph").split.t1
    assert cold.any()  # products first seen after training: embedded inductively, no retrain
    assert torch.isfinite(vectors["products"][cold]).all()


def _registered_model_serves_the_same_embeddings(uri: str, expected: torch.Tensor) -> None:
    """The registry holds a pyfunc with a signature that reproduces the asset's embeddings."""
    import mlflow.pyfunc
    import pandas as pd

    versions = MlflowClient(tracking_uri=uri).search_model_versions("name = 'hier-synthetic_ads'")
    assert len(versions) == 1
    mlflow.set_tracking_uri(uri)
    served = mlflow.pyfunc.load_model(f"models:/hier-synthetic_ads/{versions[0].version}")
    assert served.metadata.signature is not None
    rows = pd.DataFrame({"entity_type": ["products"] * 5, "node_index": range(5)})
    assert torch.allclose(torch.from_numpy(served.predict(rows)), expected, atol=1e-5)
    unknown = pd.DataFrame({"entity_type": ["nope"], "node_index": [0]})
    with pytest.raises(ValueError, match="unknown entity_type"):
        served.predict(unknown)
