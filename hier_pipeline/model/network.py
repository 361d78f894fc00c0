"""The interest model: schema-agnostic inputs -> bias-aware graph transformer with global interest
primitives -> one unit-norm embedding per root seed, in a space shared by every entity type.

    h0 = NodeInputEncoder(x)                       per node, any type
    for each layer:  h = BiasAwareGraphAttention(h)        local, relation/stage/recency/hop/popularity biases
                     h = InterestPrimitives.exchange(h)    global: nodes <-> K primitives, per root
    z = normalise(W h[root])
    score(u, i, t) = <z_u, z_i> + HistoryBias(u's earlier events on i before t)

The content view (`content_embedding`) embeds an entity from its text/image alone through the same
input encoder and output head: cross-view distillation pulls it to where the graph puts the entity,
which is what places a brand-new advertiser or product without retraining.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.typing import EdgeType

from hier_pipeline.model.attention import AttentionConfig, BiasAwareGraphAttention
from hier_pipeline.model.history import HistoryBias
from hier_pipeline.model.inputs import InputConfig, NodeInputEncoder, NodeTypeShape
from hier_pipeline.model.minibatch import ModelBatch
from hier_pipeline.model.primitives import InterestPrimitives


@dataclass(frozen=True)
class ModelConfig:
    """Architecture and ablation switches (each off-switch removes its parameters)."""

    backbone: Literal["interest", "hgt"] = "interest"  # "hgt": the PyG HGTConv peer, see hgt.py
    dim: int = 64
    heads: int = 4
    layers: int = 2
    num_primitives: int = 32
    dropout: float = 0.1
    use_primitives: bool = True
    use_history_bias: bool = True  # the learned personal-history score term, see history.py
    attention: AttentionConfig = field(default_factory=AttentionConfig)  # bias switches
    inputs: InputConfig = field(default_factory=InputConfig)


class InterestModel(nn.Module):
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
        self.inputs = NodeInputEncoder(shapes, replace(config.inputs, dim=config.dim))
        attention = replace(
            config.attention,
            dim=config.dim,
            heads=config.heads,
            num_relations=len(relations),
            num_stages=num_stages + 1,  # funnel stages plus explicit negative feedback
            dropout=config.dropout,
        )
        self.layers = nn.ModuleList(
            BiasAwareGraphAttention(attention) for _ in range(config.layers)
        )
        self.primitives = InterestPrimitives(
            config.num_primitives, config.dim, config.heads, config.dropout
        )
        self.output = nn.Linear(config.dim, config.dim)
        self.history_bias = HistoryBias.for_stages(num_stages) if config.use_history_bias else None

    def forward(self, batch: ModelBatch) -> Tensor:
        h = torch.cat(
            [self.inputs(t, batch.features[t]) for t in batch.node_types if _rows(batch, t)]
        )
        for index, layer in enumerate(self.layers):
            # Layer l updates only the nodes within (layers - 1 - l) hops of their root: the
            # others' outputs cannot reach a root any more. Their incoming edges are exactly the
            # edges whose destination is that close; every source was updated the layer before.
            reach = len(self.layers) - 1 - index
            rows = torch.nonzero(batch.hop <= reach).flatten()
            h = layer(h, batch.edges.select(batch.edges.hop <= reach), rows)
            if self.config.use_primitives:
                # Grouped by root: a root's neighbourhood never exchanges with another root's (whose
                # seed time differs), which would leak one seed's future into another's past. Only
                # the rows this layer updated take part: the rest are stale, and the bulk.
                h, _ = self.primitives.exchange(h, batch=batch.root, rows=rows)
        return F.normalize(self.output(h[batch.seed_index]), dim=-1)

    def content_embedding(self, node_type: str, features: dict[str, Tensor]) -> Tensor:
        """The content view: text/image (or the learned no-content vectors) only. Shapes: [N, dim]."""
        return F.normalize(self.output(self.inputs.content_only(node_type, features)), dim=-1)

    def primitive_logits(self, z: Tensor, temperature: float) -> Tensor:
        """Soft assignment logits of embeddings to the K primitives. Shapes: [N, dim] -> [N, K]."""
        return self.primitives.logits(z, temperature)


def _rows(batch: ModelBatch, node_type: str) -> int:
    start, end = batch.offsets[node_type]
    return end - start
