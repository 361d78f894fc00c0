"""The peer to beat: PyG's `HGTConv` (Hu et al. 2020) stacked over the same sampled neighbourhoods,
the same schema-agnostic inputs and the same ranking loss as the interest model, with none of its
additions (no edge biases, no global primitives, no distillation). Only the graph layers differ, so a
comparison at equal width and training time isolates them.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import HGTConv
from torch_geometric.typing import EdgeType

from hier_pipeline.model.batch import ModelBatch
from hier_pipeline.model.inputs import NodeInputEncoder, NodeTypeShape
from hier_pipeline.model.network import ModelConfig


class HGTBaseline(nn.Module):
    """Shapes: `forward(batch)` -> [B, dim] for the B root seeds of the batch, unit norm."""

    def __init__(
        self, shapes: dict[str, NodeTypeShape], relations: list[EdgeType], config: ModelConfig
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

    def forward(self, batch: ModelBatch) -> Tensor:
        x = {
            t: self.inputs(t, batch.features[t]) if end > start else torch.zeros(0, self.config.dim)
            for t, (start, end) in batch.offsets.items()
        }
        edges = batch.edges
        edge_index: dict[EdgeType, Tensor] = {}
        for relation_id in torch.unique(edges.relation).tolist():
            source, _, destination = relation = self.relations[relation_id]
            local = edges.index[:, edges.relation == relation_id]
            shift = torch.tensor([[batch.offsets[source][0]], [batch.offsets[destination][0]]])
            edge_index[relation] = local - shift
        for layer in self.layers:
            if edge_index:
                updated = layer(x, edge_index)  # only types that receive messages come back
                x = {t: updated.get(t, h) for t, h in x.items()}
        h = torch.cat([x[t] for t in batch.node_types])
        return F.normalize(self.output(h[batch.seed_index]), dim=-1)
