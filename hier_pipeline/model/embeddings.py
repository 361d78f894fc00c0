"""Universal embeddings of every user, advertiser and item, inferred as of one moment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from hier_pipeline.files.atomic import atomic_path
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.sampler import SamplerConfig, TemporalNeighborSampler
from hier_pipeline.model.factory import GraphEncoder
from hier_pipeline.model.infer import embed_nodes
from hier_pipeline.model.minibatch import GraphContext
from hier_pipeline.model.network import InterestModel


@dataclass(frozen=True)
class EmbeddingArtifact:
    path: Path
    as_of: int  # epoch seconds: every neighbourhood used ends strictly before this
    counts: dict[str, int]

    def load(self) -> dict[str, Tensor]:
        """node type -> [N, dim] unit-norm embeddings, rows in graph node order."""
        embeddings: dict[str, Tensor] = torch.load(self.path, weights_only=True)["embeddings"]
        return embeddings

    def primitives(self) -> Tensor:
        """The model's K interest primitives, in the same space. Shapes: [K, dim]."""
        primitives: Tensor = torch.load(self.path, weights_only=True)["primitives"]
        return primitives


def role_types(graph: RelationalGraph) -> list[str]:
    meta = graph.metadata
    return [t for t in (meta.user_type, meta.advertiser_type, meta.item_type) if t is not None]


def embed_entities(
    model: GraphEncoder,
    graph: RelationalGraph,
    content: dict[str, dict[str, Tensor]],
    path: Path,
    sampling: SamplerConfig,
    as_of: int | None = None,
) -> EmbeddingArtifact:
    """Embed every node of the user, advertiser and item types, cold-start ones included, from
    the neighbourhoods `sampling` draws as served (`SamplerConfig.as_served`)."""
    data = graph.data
    if as_of is None:
        as_of = 1 + max(int(data[t].time.max()) for t in data.node_types if data[t].num_nodes)
    sampler = TemporalNeighborSampler(data, sampling.as_served())
    context = GraphContext.of(data, list(data.edge_types), len(graph.metadata.stages), content)
    vectors = {
        node_type: embed_nodes(
            model,
            sampler,
            data,
            context,
            node_type,
            torch.arange(int(data[node_type].num_nodes)),
            as_of,
        )
        for node_type in role_types(graph)
    }
    with atomic_path(path) as partial:
        torch.save({"embeddings": vectors, "primitives": _primitives(model)}, partial)
    return EmbeddingArtifact(path, as_of, {t: len(v) for t, v in vectors.items()})


def _primitives(model: GraphEncoder) -> Tensor:
    """The interest primitives; a backbone without them (the HGT peer) has none: [0, dim]."""
    if isinstance(model, InterestModel):
        return model.primitives.primitives.detach().clone()
    return torch.zeros(0, model.config.dim)


def primitive_usage(artifact: EmbeddingArtifact) -> tuple[int, int]:
    """(primitives that are the nearest primitive of at least one entity, K)."""
    primitives = torch.nn.functional.normalize(artifact.primitives(), dim=-1)
    nearest = torch.cat([(v @ primitives.T).argmax(dim=1) for v in artifact.load().values()])
    return int(torch.unique(nearest).numel()), int(primitives.shape[0])
