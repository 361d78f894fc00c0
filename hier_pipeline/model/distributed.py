"""Data-parallel training with torch.distributed: gloo on CPU, nccl on GPU, nothing when alone.

Every rank draws the same global batch of examples and trains on its own slice of it; gradients are
averaged across ranks after each backward pass, so all ranks keep identical weights (the effect of
DDP, without its one-forward-per-backward rule: a step here runs the model several times).
Started by `torchrun`, which sets RANK and WORLD_SIZE.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn


@dataclass(frozen=True)
class Cluster:
    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, values: Tensor) -> Tensor:
        """This rank's contiguous slice of a tensor drawn identically on every rank."""
        size = len(values)
        start, end = size * self.rank // self.world_size, size * (self.rank + 1) // self.world_size
        return values[start:end]


def join_cluster(device: torch.device) -> Cluster:
    """Join the process group `torchrun` describes (idempotent); a lone process is its own
    cluster. The backend follows where the gradients live: nccl on `device` a GPU, gloo else."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return Cluster()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Cluster(dist.get_rank(), dist.get_world_size())


def average_gradients(model: nn.Module, cluster: Cluster) -> None:
    """All-reduce and average every gradient (one flat buffer: one message per step)."""
    if cluster.world_size == 1:
        return
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat)
    flat /= cluster.world_size
    offset = 0
    for grad in grads:
        grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
        offset += grad.numel()
