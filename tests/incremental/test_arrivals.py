"""Arrivals in Dagster, on a real instance: the sensor turns a new batch into one partition and
one run request, and the run materialises that partition of the two arrivals assets and nothing
else, after which the retrieval API serves the batch's entities with tokens."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets.definitions import defs
from assets.incremental import ARRIVALS
from assets.sensors import arrivals_sensor
from hier_pipeline.content.stage import ContentArtifact
from hier_pipeline.incremental.promotion import PromotionConfig, promote
from hier_pipeline.interests.index import InterestIndex
from resources import DatasetResource, StorageResource
from tests.incremental.conftest import Base
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


def test_the_run_materialises_only_the_batch_partition_and_serves_it(
    arrivals: Path, base: Base, tmp_path: Path
) -> None:
    serving = promote(
        {"map@10": 0.1},
        base.model,
        base.tokens,
        tmp_path / "promoted",
        PromotionConfig(),
        {},
        popularity=0.0,
    )
    upstream = {
        "raw_tables": base.raw,
        "relational_graph": base.graph_artifact,
        "content_embeddings": ContentArtifact(base.graph_artifact.path.parent / "content.pt"),
        "promoted_interests": serving,
    }
    folder = serving.folder
    before = InterestIndex.open(folder)
    served = {p: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(ARRIVALS.name, ["batch0001"])
    result = dg.materialize(
        [
            defs.get_assets_def("arrived_tables"),
            defs.get_assets_def("arrived_interests"),
            *(dg.AssetSpec(name) for name in upstream),
        ],
        partition_key="batch0001",
        resources={
            "dataset": DatasetResource(source=str(arrivals)),
            "storage": StorageResource(root=str(tmp_path)),
            "io_manager": dg.IOManagerDefinition.hardcoded_io_manager(HandedOver(dict(upstream))),
        },
        instance=instance,
    )
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


@pytest.mark.parametrize("job", ["all_assets_job", "full_retrain_job"])
def test_the_full_jobs_leave_the_arrivals_to_their_own_job(job: str) -> None:
    selected = defs.resolve_job_def(job).asset_layer.executable_asset_keys
    assert dg.AssetKey("raw_tables") in selected
    assert not {dg.AssetKey("arrived_tables"), dg.AssetKey("arrived_interests")} & selected
