"""Inductive inference: embed any node of the full graph as of a given time, trained on it or not.

A node is embedded from its own features and content plus whatever neighbourhood existed before
the time asked for, so entities that arrived after training (cold start) need no retraining.
Neighbours are the most recent ones (deterministic), whatever the sampler's training strategy.
The model runs where its weights are; what these functions return is on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from hier_pipeline.graph.sampler import TemporalNeighborSampler
from hier_pipeline.model.device import model_device
from hier_pipeline.model.factory import GraphEncoder
from hier_pipeline.model.history import InteractionHistory
from hier_pipeline.model.minibatch import GraphContext, make_batch
from hier_pipeline.ranking.metrics import PairScores


@torch.inference_mode()
def embed_nodes(
    model: GraphEncoder,
    sampler: TemporalNeighborSampler,
    data: HeteroData,
    context: GraphContext,
    node_type: str,
    nodes: Tensor,
    time: int | Tensor,
    chunk: int = 512,
    progress: Callable[[int], None] | None = None,
) -> Tensor:
    """Embeddings of `nodes` of `node_type` as of `time` (one time for all, or one per node).

    Shapes: nodes [N] -> [N, dim], unit norm.
    """
    was_training, device = model.training, model_device(model)
    model.eval()
    times = (
        torch.full_like(nodes, int(time)) if not isinstance(time, Tensor) else time.to(torch.int64)
    )
    parts = []
    for start in range(0, len(nodes), chunk):
        sampled = sampler.sample(
            node_type, nodes[start : start + chunk], times[start : start + chunk], "recent"
        )
        parts.append(model(make_batch(sampled, data, context).to(device)).cpu())
        if progress is not None:
            progress(min(start + chunk, len(nodes)))
    model.train(was_training)
    return torch.cat(parts) if parts else torch.zeros(0, model.config.dim)


def history_scores(
    model: GraphEncoder,
    history: InteractionHistory,
    users: Tensor,
    as_of: int,
) -> PairScores | None:
    """The history term of a full ranking, for each user's items engaged before `as_of`."""
    bias = model.history_bias
    if bias is None:
        return None
    rows, items, features = history.pairs_of(users, as_of)
    with torch.no_grad():
        return PairScores(rows, items, bias(features.to(model_device(model))).cpu())
