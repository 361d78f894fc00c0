"""One place that turns a `ModelConfig` into a module, so training, checkpoints and artifacts never
need to know which backbone they hold."""

from __future__ import annotations

from torch_geometric.typing import EdgeType

from hier_pipeline.model.hgt import HGTBaseline
from hier_pipeline.model.inputs import NodeTypeShape
from hier_pipeline.model.network import InterestModel, ModelConfig

GraphEncoder = InterestModel | HGTBaseline


def build_model(
    shapes: dict[str, NodeTypeShape],
    relations: list[EdgeType],
    num_stages: int,
    config: ModelConfig,
) -> GraphEncoder:
    if config.backbone == "hgt":
        return HGTBaseline(shapes, relations, num_stages, config)
    return InterestModel(shapes, relations, num_stages, config)
