"""A copy of the tiny synthetic world that receives batches, and the state a batch is fitted
into (warehouse, graph, content, a briefly trained model, its tree and tokens), built once."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from hier_pipeline.dataset import LoadReport, load_dataset, parse_dataset
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.graph import GraphArtifact, RelationalGraph
from hier_pipeline.incremental.update import Current
from hier_pipeline.interests.artifact import TokensArtifact
from hier_pipeline.model.embeddings import EmbeddingArtifact
from hier_pipeline.pipeline.chain import GRAPH_FILE, MODEL_FILE, ChainConfig, run_chain
from hier_pipeline.pipeline.prepare import Prepared
from hier_pipeline.synthetic.arrivals import BatchConfig, generate_batch
from tests.interests.conftest import TINY


@dataclass(frozen=True)
class Base:
    """The materialised dataset before any batch, as the assets leave it."""

    spec: DatasetSpec
    raw: LoadReport
    graph: RelationalGraph
    graph_artifact: GraphArtifact
    content: dict
    model: Path
    embeddings: EmbeddingArtifact
    tokens: TokensArtifact
    trained: torch.nn.Module

    def current(self, folder: Path, cache: Path) -> Current:
        """The state a batch is fitted into, its batch files going to `folder`."""
        return Current(
            self.raw.database,
            self.graph,
            self.content,
            self.model,
            self.tokens.load(),
            folder,
            cache,
        )


@pytest.fixture(scope="session")
def arrivals(synthetic_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny world with one generated batch in incoming/ (a copy: the shared world stays
    without batches)."""
    folder = tmp_path_factory.mktemp("arrivals") / "world"
    shutil.copytree(synthetic_world, folder)
    generate_batch(folder, "batch0001", BatchConfig(products_fraction=0.05, seed=0))
    return folder


@pytest.fixture(scope="session")
def base(
    arrivals: Path, synthetic_pipeline: tuple, tmp_path_factory: pytest.TempPathFactory
) -> Base:
    """The dataset as materialised before the batch came (the shared pipeline's graph and content
    are of the same files), a TINY model trained on it, its embeddings, tree and tokens."""
    graph, content, split = synthetic_pipeline
    folder = tmp_path_factory.mktemp("base")
    spec = parse_dataset(arrivals)
    raw = load_dataset(spec, folder / "warehouse.duckdb")
    prepared = Prepared(spec, graph, content, split, raw.database)
    done = run_chain(prepared, folder, ChainConfig(train=TINY))
    return Base(
        spec,
        raw,
        graph,
        GraphArtifact.describe(graph, folder / GRAPH_FILE, split),
        content,
        folder / MODEL_FILE,
        done.embeddings,
        done.tokens,
        done.trained.result.model,
    )
