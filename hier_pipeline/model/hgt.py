"""The peer to beat: PyG's `HGTConv` (Hu et al. 2020) stacked over the same sampled neighbourhoods,
the same schema-agnostic inputs and the same ranking loss as the interest model, with none of its
additions (no edge biases, no global primitives, no distillation). Only the graph layers differ, so a
comparison at equal width and training time isolates them. The personal-history score term is not
part of the graph layers: it follows `ModelConfig.use_history_bias` here too (off for the plain
PyG peer), so "HGT + history" can be measured as well.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import HGTConv
from torch_geometric.typing import EdgeType

from hier_pipeline.model.history import HistoryBias
from hier_pipeline.model.inputs import NodeInputEncoder, NodeTypeShape
from hier_pipeline.model.minibatch import ModelBatch
from hier_pipeline.model.network import ModelConfig


class HGTBaseline(nn.Module):
    """Shapes: `forward(batch)` -> [B, dim] for the B root seeds of the batch, unit norm."""

    def __init__(
        self,
        shapes: dict[str, NodeTypeShape],
        relations: list[EdgeType],
        num_stages: int,
        config: ModelConfig,
    ) -> None:
        super().__init__()
        self.config = config
        self.relations = relations
        self.inputs = NodeInputEncoder(shapes, replace(config.inputs, dim=config.dim))
        metadata = (list(shapes), relations)
        self.layers = nn.ModuleList(
            HGTConv(config.dim, config.dim, metadata, config.heads) for _ in range(config.layers)
        )
        self.output = nn.Linear(config.dim, config.dim)
        self.history_bias = HistoryBias.for_stages(num_stages) if config.use_history_bias else None

    def forward(self, batch: ModelBatch) -> Tensor:
        x = {
            t: self.inputs(t, batch.features[t]) if end > start else torch.zeros(0, self.config.dim)
            for t, (start, end) in batch.offsets.items()
        }
        hop = {t: batch.hop[start:end] for t, (start, end) in batch.offsets.items()}
        for index, layer in enumerate(self.layers):
            # PyG's trim-to-layer: layer l sees the nodes within (layers - l) hops, a prefix of
            # each type (the sampler emits nodes hop by hop), and the edges among them.
            reach = len(self.layers) - index
            kept = {t: int((h <= reach).sum()) for t, h in hop.items()}
            edge_index = self._edge_index(batch, batch.edges.hop <= reach - 1)
            if not edge_index:
                continue
            updated = layer({t: h[: kept[t]] for t, h in x.items()}, edge_index)
            x = {
                t: torch.cat([updated[t], h[kept[t] :]]) if t in updated else h
                for t, h in x.items()
            }
        h = torch.cat([x[t] for t in batch.node_types])
        return F.normalize(self.output(h[batch.seed_index]), dim=-1)

    def _edge_index(self, batch: ModelBatch, keep: Tensor) -> dict[EdgeType, Tensor]:
        """The kept edges per relation, in each type's local node indices."""
        edges = batch.edges.select(keep)
        edge_index: dict[EdgeType, Tensor] = {}
        for relation_id in torch.unique(edges.relation).tolist():
            source, _, destination = relation = self.relations[relation_id]
            local = edges.index[:, edges.relation == relation_id]
            shift = torch.tensor([[batch.offsets[source][0]], [batch.offsets[destination][0]]])
            edge_index[relation] = local - shift
        return edge_index
