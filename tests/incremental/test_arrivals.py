"""Arrivals in Dagster, on a real instance: the sensor turns a new batch into one partition and
one run request, and the run materialises that partition of the two arrivals assets and nothing
else, after which the retrieval API serves the batch's entities with tokens."""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from assets.definitions import defs
from assets.incremental import ARRIVALS
from assets.sensors import arrivals_sensor
from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.dataset.arrivals import incoming_folder
from hier_pipeline.interests.index import InterestIndex
from hier_pipeline.release.promotion import PromotionConfig, promote
from resources import DatasetResource, MLflowResource, StorageResource
from tests.incremental.conftest import Base
from tests.incremental.test_promotion import PASSING
from tests.interests.conftest import HandedOver


def _sense(instance: dg.DagsterInstance, folder: Path, cursor: str | None) -> object:
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"dataset": DatasetResource(source=str(folder))}
    )
    return arrivals_sensor(context)


def test_a_new_batch_makes_one_partition_and_one_run_request(arrivals: Path) -> None:
    with dg.instance_for_test() as instance:
        result = _sense(instance, arrivals, None)
        assert isinstance(result, dg.SensorResult)
        (request,) = result.run_requests or []
        assert request.partition_key == "batch0001" and request.run_key == "batch0001"
        (added,) = result.dynamic_partitions_requests or []
        assert isinstance(added, dg.AddDynamicPartitionsRequest)
        instance.add_dynamic_partitions(added.partitions_def_name, list(added.partition_keys))
        assert instance.get_dynamic_partitions(ARRIVALS.name) == ["batch0001"]
        assert result.cursor == "batch0001"
        again = _sense(instance, arrivals, result.cursor)  # nothing new: no run, no partition
        assert isinstance(again, dg.SkipReason)


def served_upstream(base: Base, tmp_path: Path) -> dict[str, Any]:
    """The assets an arrival batch reads, with the base model and tokens promoted to serving."""
    serving = promote(PASSING, base.model, base.tokens, tmp_path / "serving", PromotionConfig(), {})
    return {
        "raw_tables": base.raw,
        "relational_graph": base.graph_artifact,
        "content_embeddings": ContentArtifact(base.graph_artifact.path.parent / "content.pt"),
        "promoted_interests": serving,
    }


def test_the_run_materialises_only_the_batch_partition_and_serves_it(
    arrivals: Path, base: Base, tmp_path: Path
) -> None:
    upstream = served_upstream(base, tmp_path)
    folder = upstream["promoted_interests"].folder
    before = InterestIndex.open(folder)
    served = {p: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    instance = dg.DagsterInstance.ephemeral()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    materialise = partial(_materialise, arrivals, tmp_path, upstream, uri, instance)
    result = materialise("batch0001")
    assert result.success
    materialised = [
        (e.asset_key.to_user_string(), e.partition)
        for e in result.get_asset_materialization_events()
    ]
    assert sorted(materialised) == [
        ("arrived_interests", "batch0001"),
        ("arrived_tables", "batch0001"),
    ]
    assert {p: p.read_bytes() for p in served} == served  # the served files untouched
    update = result.output_for_node("arrived_interests")
    after = InterestIndex.open(folder)
    new = [k for k in after.keys["products"] if k not in set(before.keys["products"])]
    assert len(new) == update.entities["products"] > 0
    for key in new:
        assert {i.level for i in after.interests_of("item", key)} == {0, 1, 2}
    (event,) = result.asset_materializations_for_node("arrived_interests")
    assert event.metadata["entities"].value == update.entities
    assert new[0] in event.metadata["keys"].value
    run = MlflowClient(tracking_uri=uri).get_run(event.metadata["mlflow_run"].value.split("/")[-1])
    assert run.data.tags["batch"] == "batch0001"
    assert run.data.metrics["entities/products"] == len(new)
    assert run.data.metrics["rows/events/quarantined"] == 0


def test_each_partition_shows_what_its_batch_added_quarantined_and_embedded_again(
    arrivals: Path, base: Base, tmp_path: Path
) -> None:
    """A second batch: a new product, one whose advertiser nobody knows, an event on the first
    batch's product and one on the rejected product. Its partition shows the batches since the
    full load, the two quarantined rows with their reasons, table, column and row, the product
    added and the first batch's product embedded again; so does its MLflow run."""
    upstream = served_upstream(base, tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    materialise = partial(
        _materialise, arrivals, tmp_path, upstream, uri, dg.DagsterInstance.ephemeral()
    )
    first = incoming_folder(arrivals) / "batch0001"
    products = pd.read_parquet(first / "products.parquet").head(2).copy()
    earlier = int(products["product_id"].iloc[0])
    products["product_id"] = [10**6, 10**6 + 1]
    products.loc[1, "advertiser_id"] = 10**9  # nobody
    events = pd.read_parquet(first / "events.parquet").head(2).copy()
    events["product_id"] = [earlier, 10**6 + 1]
    second = incoming_folder(arrivals) / "batch0002"
    second.mkdir()
    try:
        products.to_parquet(second / "products.parquet", index=False)
        events.to_parquet(second / "events.parquet", index=False)
        assert materialise("batch0001").success
        result = materialise("batch0002")
    finally:
        shutil.rmtree(second)
    assert result.success
    (tables,) = result.asset_materializations_for_node("arrived_tables")
    metadata = {k: v.value for k, v in tables.metadata.items()}
    assert metadata["batches_since_full_load"] == ["batch0001", "batch0002"]
    assert metadata["rows_quarantined"] == 2
    assert metadata["quarantined_by_reason"] == {"dangling_foreign_key": 2}
    preview = metadata["quarantine_preview"]
    assert "row 2: products.advertiser_id = 1000000000 not found" in preview
    assert f"row 2: events.product_id = {10**6 + 1} not found" in preview
    (interests,) = result.asset_materializations_for_node("arrived_interests")
    update = result.output_for_node("arrived_interests")
    assert interests.metadata["entities"].value == {"products": 1}
    assert interests.metadata["entities_embedded_again"].value["products"] == 1
    assert update.keys["products"] == [str(10**6), str(earlier)]
    assert interests.metadata["bags_placed_by"].value == update.placed_by
    assert update.placed_by["products"] == {"code": 2}
    assert update.placed_by["users"] == {"events": update.refreshed["users"], "embedding": 0}
    run_id = interests.metadata["mlflow_run"].value.split("/")[-1]
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    assert run.data.metrics["quarantined/products/dangling_foreign_key"] == 1
    assert run.data.metrics["quarantined/events/dangling_foreign_key"] == 1
    assert run.data.metrics["embedded_again/products"] == 1
    assert run.data.metrics["placed_by/products/code"] == 2
    page = Path(client.download_artifacts(run_id, "batch.md", str(tmp_path)))
    assert "products.advertiser_id = 1000000000 not found" in page.read_text()


def _materialise(
    arrivals: Path,
    home: Path,
    upstream: dict[str, object],
    mlflow_uri: str,
    instance: dg.DagsterInstance,
    batch: str,
) -> dg.ExecuteInProcessResult:
    """One partition of the two arrivals assets, the upstream handed over as materialised."""
    instance.add_dynamic_partitions(ARRIVALS.name, [batch])
    return dg.materialize(
        [
            defs.get_assets_def("arrived_tables"),
            defs.get_assets_def("arrived_interests"),
            *(dg.AssetSpec(name) for name in upstream),
        ],
        partition_key=batch,
        resources={
            "dataset": DatasetResource(source=str(arrivals)),
            "storage": StorageResource(root=str(home)),
            "mlflow": MLflowResource(tracking_uri=mlflow_uri, experiment="tests"),
            "io_manager": dg.IOManagerDefinition.hardcoded_io_manager(HandedOver(dict(upstream))),
        },
        instance=instance,
    )


@pytest.mark.parametrize("job", ["all_assets_job", "full_retrain_job"])
def test_the_full_jobs_leave_the_arrivals_to_their_own_job(job: str) -> None:
    selected = defs.resolve_job_def(job).asset_layer.executable_asset_keys
    assert dg.AssetKey("raw_tables") in selected
    assert not {dg.AssetKey("arrived_tables"), dg.AssetKey("arrived_interests")} & selected
