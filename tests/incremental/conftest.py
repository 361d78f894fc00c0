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
from hier_pipeline.graph import GraphArtifact, RelationalGraph, save_graph
from hier_pipeline.incremental.update import Current
from hier_pipeline.interests.artifact import TokensArtifact
from hier_pipeline.interests.build import build_interest_hierarchy, build_interest_tokens
from hier_pipeline.interests.hierarchy import HierarchyConfig
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.model.artifact import save_model
from hier_pipeline.model.embeddings import EmbeddingArtifact, embed_entities
from hier_pipeline.model.train import train_model
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
            TINY.fanouts,
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
    save_graph(graph, folder / "graph.pt")
    torch.save(content, folder / "content.pt")
    trained = train_model(graph, content, split, TINY).model
    save_model(trained, folder / "model.pt")
    embeddings = embed_entities(trained, graph, content, folder / "embeddings.pt", TINY.fanouts)
    interests = folder / "interests"
    hierarchy = build_interest_hierarchy(embeddings, graph, interests, HierarchyConfig())
    tokens = build_interest_tokens(
        embeddings, hierarchy, spec, raw.database, interests, TokenConfig()
    )
    return Base(
        spec,
        raw,
        graph,
        GraphArtifact.describe(graph, folder / "graph.pt", split),
        content,
        folder / "model.pt",
        embeddings,
        tokens,
        trained,
    )
