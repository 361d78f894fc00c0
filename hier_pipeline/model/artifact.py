"""The trained model as a file: weights plus what is needed to rebuild it next to its graph, and
the neighbourhoods it embeds from, so that every later stage samples as training did."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from hier_pipeline.files.atomic import atomic_path
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.sampler import SamplerConfig, StageFanouts
from hier_pipeline.model.attention import AttentionConfig
from hier_pipeline.model.factory import GraphEncoder, build_model
from hier_pipeline.model.inputs import InputConfig, node_type_shapes
from hier_pipeline.model.network import ModelConfig
from hier_pipeline.model.train_config import TrainConfig


@dataclass(frozen=True)
class ModelArtifact:
    path: Path
    best_epoch: int
    metrics: dict[str, float]  # validation metrics of the best epoch
    history: list[dict[str, float]]  # per epoch: losses, validation metrics, timings
    baselines: dict[str, float]  # e.g. "popularity/map@10", same window and candidates
    run_id: str | None = None

    def load(self, graph: RelationalGraph, content: dict[str, dict[str, Tensor]]) -> GraphEncoder:
        return load_model(self.path, graph, content)

    def sampling(self) -> SamplerConfig:
        """How the model embeds, as it was trained to (`load_sampling`): every stage that embeds
        with it follows the file, not a config of its own that could differ."""
        return load_sampling(self.path)


def load_model(
    path: Path, graph: RelationalGraph, content: dict[str, dict[str, Tensor]]
) -> GraphEncoder:
    """Rebuild a `save_model` file next to the graph and content it was trained with, in eval mode."""
    payload = torch.load(path, weights_only=True)
    config = ModelConfig(
        **{
            **payload["config"],
            "attention": AttentionConfig(**payload["config"]["attention"]),
            "inputs": InputConfig(**payload["config"]["inputs"]),
        }
    )
    model = build_model(
        node_type_shapes(graph.data, content),
        list(graph.data.edge_types),
        len(graph.metadata.stages),
        config,
    )
    model.load_state_dict(payload["state_dict"])
    return model.eval()


def save_model(model: GraphEncoder, path: Path, sampling: SamplerConfig) -> None:
    """Atomic write of weights, config and the neighbourhoods the model was trained on (plain
    tensors, numbers and lists: `weights_only` loads it)."""
    payload: dict[str, Any] = {
        "state_dict": model.state_dict(),
        "config": asdict(model.config),
        "sampling": _sampling_payload(sampling),
    }
    with atomic_path(path) as partial:
        torch.save(payload, partial)


def load_sampling(path: Path) -> SamplerConfig:
    """How the model in `path` embeds, as served (`SamplerConfig.as_served`); a file written
    before models recorded it: the default training config's fanouts."""
    payload = torch.load(path, weights_only=True)
    if "sampling" not in payload:
        return SamplerConfig(TrainConfig.fanouts, "recent")
    return _sampling_from(payload["sampling"])


def _sampling_payload(sampling: SamplerConfig) -> dict[str, Any]:
    """The fanouts of `sampling` as plain lists (the strategy and seed are training's own)."""
    stage = sampling.stage
    return {
        "fanouts": list(sampling.fanouts),
        "stage": None if stage is None else [stage.stage, list(stage.fanouts)],
    }


def _sampling_from(payload: dict[str, Any]) -> SamplerConfig:
    """`_sampling_payload`'s inverse, as served."""
    stage = payload.get("stage")
    return SamplerConfig(
        tuple(payload["fanouts"]),
        "recent",
        stage=None if stage is None else StageFanouts(stage[0], tuple(stage[1])),
    )
