"""Training examples drawn from the `engaged` edges before the end of training (t1).

Positives are funnel events. A stage is drawn with probability proportional to its funnel weight
(the deepest stage, the target, most often) and an event uniformly within it: this is how the loss
is "weighted by funnel depth" without spending most steps on near-zero-weight impressions. Each
positive gets the same user's explicit "not interested" item as a hard negative where one exists.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from hier_pipeline.graph.build import GraphMetadata
from hier_pipeline.model.distributed import Cluster
from hier_pipeline.model.losses import default_stage_weights


@dataclass
class ExampleBatch:
    """Shapes: all [B]; `hard_item` is -1 where the user gave no negative feedback."""

    user: Tensor
    item: Tensor
    time: Tensor
    stage: Tensor
    hard_item: Tensor

    def shard(self, cluster: Cluster) -> ExampleBatch:
        """This rank's slice (every rank draws the same global batch)."""
        return ExampleBatch(
            *(
                cluster.shard(values)
                for values in (self.user, self.item, self.time, self.stage, self.hard_item)
            )
        )


class ExampleSampler:
    def __init__(
        self,
        data: HeteroData,
        metadata: GraphMetadata,
        seed: int,
        before: int | None = None,
        stage_ratio: float = 0.3,
    ) -> None:
        engaged = data[metadata.engaged]
        early = slice(None) if before is None else (engaged.edge_time < before).numpy()
        self.user = engaged.edge_index[0].numpy()[early]
        self.item = engaged.edge_index[1].numpy()[early]
        self.time, stage = engaged.edge_time.numpy()[early], engaged.edge_stage.numpy()[early]
        self.stage = stage
        weights = default_stage_weights(len(metadata.stages), stage_ratio).numpy()
        self.by_stage = [np.flatnonzero(stage == s) for s in range(len(metadata.stages))]
        present = np.array([len(events) > 0 for events in self.by_stage])
        if not present.any():
            raise ValueError("the training graph has no funnel events to learn from")
        self.stage_probability = (
            np.where(present, weights, 0.0) / np.where(present, weights, 0.0).sum()
        )
        negative = engaged.edge_negative.numpy()[early]
        order = np.argsort(self.user[negative], kind="stable")
        self.negative_items = self.item[negative][order]
        self.negative_start = np.searchsorted(
            self.user[negative][order], np.arange(int(data[metadata.user_type].num_nodes) + 1)
        )
        self.rng = np.random.default_rng(seed)

    def item_probability(self, num_items: int) -> np.ndarray:
        """P(item) of one `draw`: the stage's probability times the item's share of that stage's
        events. Shapes: [num_items], summing to 1 (the logQ correction of the ranking loss)."""
        probability = np.zeros(num_items)
        for stage, events in enumerate(self.by_stage):
            if len(events):
                counts = np.bincount(self.item[events], minlength=num_items)
                probability += self.stage_probability[stage] * counts / len(events)
        return probability

    @property
    def num_positives(self) -> int:
        return int(sum(len(events) for events in self.by_stage))

    def draw(self, batch_size: int) -> ExampleBatch:
        stages = self.rng.choice(len(self.by_stage), size=batch_size, p=self.stage_probability)
        events = np.empty(batch_size, dtype=np.int64)
        for stage in np.unique(stages):
            chosen = stages == stage
            events[chosen] = self.rng.choice(self.by_stage[stage], size=int(chosen.sum()))
        users = self.user[events]
        start, end = self.negative_start[users], self.negative_start[users + 1]
        pick = start + (self.rng.random(batch_size) * np.maximum(end - start, 1)).astype(np.int64)
        items = self.negative_items if len(self.negative_items) else np.full(1, -1)
        hard = np.where(end > start, items[np.minimum(pick, len(items) - 1)], -1)
        return ExampleBatch(
            user=torch.from_numpy(users),
            item=torch.from_numpy(self.item[events]),
            time=torch.from_numpy(self.time[events]),
            stage=torch.from_numpy(self.stage[events]),
            hard_item=torch.from_numpy(hard.astype(np.int64)),
        )
