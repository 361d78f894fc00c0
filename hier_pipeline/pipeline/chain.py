"""The whole chain in one process, without Dagster: prepare -> train -> register -> embed ->
hierarchy -> tokens. The assets run the same steps one per asset; `hier evaluate`, the
benchmarks and the test fixtures call `run_chain`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from hier_pipeline.graph import save_graph
from hier_pipeline.interests.artifact import HierarchyArtifact, TokensArtifact
from hier_pipeline.interests.build import build_interest_hierarchy, build_interest_tokens
from hier_pipeline.interests.hierarchy import HierarchyConfig
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.model.embeddings import EmbeddingArtifact, embed_entities
from hier_pipeline.model.train_config import TrainConfig
from hier_pipeline.pipeline.prepare import Prepared
from hier_pipeline.pipeline.train import Registration, TrainedModel, train_interest_model
from hier_pipeline.tracking import TrackedRun

GRAPH_FILE = "graph.pt"
CONTENT_FILE = "content.pt"
MODEL_FILE = "model.pt"
EMBEDDINGS_FILE = "embeddings.pt"
INTERESTS_FOLDER = "interests"


@dataclass(frozen=True)
class ChainConfig:
    train: TrainConfig = field(default_factory=TrainConfig)
    hierarchy: HierarchyConfig = field(default_factory=HierarchyConfig)
    tokens: TokenConfig = field(default_factory=TokenConfig)


@dataclass
class ChainResult:
    trained: TrainedModel
    embeddings: EmbeddingArtifact
    hierarchy: HierarchyArtifact
    tokens: TokensArtifact
    seconds: dict[str, float]  # per step: train (with registering), embed, interests


def run_chain(
    prepared: Prepared,
    out_dir: Path,
    config: ChainConfig = ChainConfig(),
    run: TrackedRun | None = None,
    progress: Callable[[str], None] | None = None,
) -> ChainResult:
    """Every step after `prepare`, into `out_dir`: the graph and content beside the model (what
    the registered pyfunc and the arrivals path read), the model, the entity embeddings as of the
    end of the data, the interest tree and the tokens. With `run`, training is logged to it and
    the model registered as `hier-<dataset>`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    graph, content = prepared.graph, prepared.content
    graph_path, content_path = out_dir / GRAPH_FILE, out_dir / CONTENT_FILE
    save_graph(graph, graph_path)
    if not content_path.is_file():  # `prepare` leaves it there when it worked in `out_dir`
        torch.save(content, content_path)
    registration = (
        Registration(run, f"hier-{prepared.spec.name}", graph_path, content_path) if run else None
    )
    clock = _StepClock()
    trained = train_interest_model(
        graph,
        content,
        prepared.split,
        config.train,
        out_dir / MODEL_FILE,
        registration=registration,
        progress=progress,
    )
    clock.lap("train")
    embeddings = embed_entities(
        trained.result.model,
        graph,
        content,
        out_dir / EMBEDDINGS_FILE,
        config.train.neighbourhoods(len(graph.metadata.stages)),
    )
    clock.lap("embed")
    interests = out_dir / INTERESTS_FOLDER
    hierarchy = build_interest_hierarchy(embeddings, graph, interests, config.hierarchy, content)
    tokens = build_interest_tokens(
        embeddings,
        hierarchy,
        prepared.spec,
        prepared.database,
        interests,
        config.tokens,
        graph=graph,
    )
    clock.lap("interests")
    return ChainResult(trained, embeddings, hierarchy, tokens, clock.seconds)


class _StepClock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        self.seconds[step] = now - self._last
        self._last = now
