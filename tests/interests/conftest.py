"""The interests stage on the tiny synthetic world, built once per session: its inputs (warehouse,
graph, a briefly trained model's entity embeddings, the planted truth) and its two assets
materialised into a scratch home with their checks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from assets.definitions import defs
from assets.interests import interest_hierarchy_checks, interest_token_checks
from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.dataset import LoadReport, load_dataset, parse_dataset
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.graph import GraphArtifact
from hier_pipeline.interests.entities import primary_keys
from hier_pipeline.model.embeddings import EmbeddingArtifact
from hier_pipeline.model.network import ModelConfig
from hier_pipeline.model.train_config import TrainConfig
from hier_pipeline.pipeline.chain import CONTENT_FILE, GRAPH_FILE, ChainConfig, run_chain
from hier_pipeline.pipeline.prepare import Prepared
from resources import DatasetResource, StorageResource

# As the model tests train it: embeddings with some structure in a few seconds on 2 cores.
TINY = TrainConfig(
    model=ModelConfig(dim=32, num_primitives=8), epochs=3, steps_per_epoch=4, batch_size=64
)
CHAIN = ChainConfig(train=TINY)


@dataclass(frozen=True)
class InterestInputs:
    folder: Path  # the dataset folder
    spec: DatasetSpec
    report: LoadReport
    graph: GraphArtifact
    embeddings: EmbeddingArtifact
    content: dict
    truth: pd.DataFrame  # the planted coarse_id/mid_id/fine_id of every product, in node order


@pytest.fixture(scope="session")
def interest_inputs(
    synthetic_world: Path, synthetic_pipeline: tuple, tmp_path_factory: pytest.TempPathFactory
) -> InterestInputs:
    graph, content, split = synthetic_pipeline
    folder = tmp_path_factory.mktemp("interest_inputs")
    spec = parse_dataset(synthetic_world)
    report = load_dataset(spec, folder / "warehouse.duckdb")
    done = run_chain(Prepared(spec, graph, content, split, report.database), folder, CHAIN)
    keys = primary_keys(report.database, spec, ["products"])["products"]
    truth = pd.read_parquet(synthetic_world / "truth" / "products.parquet")
    return InterestInputs(
        synthetic_world,
        spec,
        report,
        GraphArtifact.describe(graph, folder / GRAPH_FILE, split),
        done.embeddings,
        content,
        truth.set_index("product_id").loc[[int(k) for k in keys]],
    )


class HandedOver(dg.IOManager):
    """Keeps step outputs in memory and hands over the upstream stages that `interest_inputs`
    built, so the test materialises only the interests stage (the full chain costs a minute)."""

    def __init__(self, values: dict[str, object]) -> None:
        self.values = values

    def handle_output(self, context: dg.OutputContext, obj: object) -> None:
        self.values[context.asset_key.to_user_string()] = obj

    def load_input(self, context: dg.InputContext) -> object:
        return self.values[context.asset_key.to_user_string()]


@dataclass(frozen=True)
class Materialised:
    result: dg.ExecuteInProcessResult
    home: Path  # the storage root: interests/<dataset>/ holds the files


@pytest.fixture(scope="session")
def materialised(
    interest_inputs: InterestInputs, tmp_path_factory: pytest.TempPathFactory
) -> Materialised:
    return materialise_interests(interest_inputs, tmp_path_factory.mktemp("home"))


def materialise_interests(
    interest_inputs: InterestInputs, home: Path, config: dict[str, object] | None = None
) -> Materialised:
    """The two interests assets and their checks, `config` the hierarchy's launch config."""
    upstream = {
        "raw_tables": interest_inputs.report,
        "relational_graph": interest_inputs.graph,
        "entity_embeddings": interest_inputs.embeddings,
        "content_embeddings": ContentArtifact(interest_inputs.graph.path.parent / CONTENT_FILE),
    }
    result = dg.materialize(
        [
            defs.get_assets_def("interest_hierarchy"),
            defs.get_assets_def("interest_tokens"),
            interest_hierarchy_checks,
            interest_token_checks,
            *(dg.AssetSpec(name) for name in upstream),
        ],
        resources={
            "dataset": DatasetResource(source=str(interest_inputs.folder)),
            "storage": StorageResource(root=str(home)),
            "io_manager": dg.IOManagerDefinition.hardcoded_io_manager(HandedOver(upstream)),
        },
        run_config={"ops": {"interest_hierarchy": {"config": config or {}}}},
        instance=dg.DagsterInstance.ephemeral(),
    )
    return Materialised(result, home)
