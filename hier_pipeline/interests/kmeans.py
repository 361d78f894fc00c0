"""Spherical k-means with capacity limits: clusters of unit vectors by cosine, seeded, in torch.

Cosine is the metric the model's embeddings are trained in (users score items by inner product of
unit vectors), so the centroids are unit vectors of the same space and an entity's nearest
centroid is its best-scoring primitive.

No cluster may hold more than `capacity` times its fair share (N / k): a point that would
overfill one goes to its best cluster with room (the least similar members leave first), so no
interest swallows the catalogue and the tree's capacity is spent where items differ. A limit, not
a balance: clusters smaller than the cap are left as the data makes them, so a real catalogue's
uneven departments stay uneven up to the cap.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass(frozen=True)
class KMeansConfig:
    """`restarts` independent k-means++ runs; the one with the highest total cosine wins.
    `capacity`: the most points a cluster may hold, as a multiple of N / k (None: no limit)."""

    iterations: int = 50
    restarts: int = 4
    capacity: float | None = 3.0


@dataclass(frozen=True)
class Clusters:
    """Every point belongs to its nearest centroid and no cluster is empty.

    Shapes: centroids [k', d] unit norm (k' <= k), labels [N] in 0..k'-1.
    """

    centroids: Tensor
    labels: Tensor


def spherical_kmeans(
    x: Tensor,
    k: int,
    generator: torch.Generator,
    config: KMeansConfig = KMeansConfig(),
    start: Tensor | None = None,
) -> Clusters:
    """Cluster the rows of `x` (unit norm) into at most `k` clusters (fewer only when `x` has
    fewer distinct rows), each point in its nearest cluster with room. Deterministic for a given
    generator state; `start` (unit-norm centroids, e.g. a previous tree's; k is then its length)
    replaces the k-means++ restarts.

    Shapes: x [N, d], start [k, d] -> centroids [k', d], labels [N].
    """
    if len(x) == 0 or k < 1:
        raise ValueError(f"cannot cluster {len(x)} points into {k} clusters")
    if start is not None:
        k, starts = len(start), [start]
    else:
        k = min(k, len(x))
        starts = [
            _kmeans_plus_plus(x, k, generator) for _ in range(config.restarts if k > 1 else 1)
        ]
    cap = capacity_limit(len(x), k, config.capacity)
    best: tuple[float, Tensor] | None = None
    for initial in starts:
        centroids = _lloyd(x, initial, config.iterations, cap)
        similarity = x @ centroids.T
        score = float(similarity.gather(1, capped_argmax(similarity, cap)[:, None]).sum())
        if best is None or score > best[0]:
            best = (score, centroids)
    assert best is not None
    return _nonempty(x, best[1], cap)


def capped_argmax(similarity: Tensor, cap: int) -> Tensor:
    """Each row's best column among those with room: columns over `cap` keep their most similar
    rows and the rest move to their next best, until none is over. Shapes: [N, k] -> [N]."""
    blocked = torch.zeros_like(similarity, dtype=torch.bool)
    labels = similarity.argmax(dim=1)
    while (
        evicted := _over_cap(labels, similarity.gather(1, labels[:, None]).squeeze(1), cap)
    ).any():
        blocked[evicted, labels[evicted]] = True
        labels = similarity.masked_fill(blocked, -torch.inf).argmax(dim=1)
    return labels


def streamed_capped_argmax(
    x: Tensor, centroids: Tensor, cap: int, width: int = 16, block: int = 1 << 24
) -> Tensor:
    """`capped_argmax(x @ centroids.T, cap)` without the N x k similarities: a row evicted from a
    column moves to its next best, so a row's columns are tried in its own order of similarity,
    and only the first few are ever needed. Each row's `width` best columns are kept (from blocks
    of rows of `block` similarities at most); a row evicted from all of them reads its whole row
    again. Memory: N x width + one block, where the refit of Complete Journey's 92k items to 3,847
    codes held 1.7 GB. Shapes: x [N, d], centroids [k, d] -> [N] in 0..k-1."""
    width = min(width, len(centroids))
    step = max(1, block // len(centroids))
    order = torch.cat(
        [
            (x[start : start + step] @ centroids.T).topk(width, dim=1).indices
            for start in range(0, len(x), step)
        ]
    )
    tried = torch.zeros(len(x), dtype=torch.long)  # columns each row has been evicted from
    labels = order[:, 0].clone()
    while (evicted := _over_cap(labels, (x * centroids[labels]).sum(dim=1), cap)).any():
        tried[evicted] += 1
        listed = evicted & (tried < width)
        labels[listed] = order[listed, tried[listed]]
        beyond = (evicted & ~listed).nonzero().flatten()
        for start in range(0, len(beyond), step):
            rows = beyond[start : start + step]
            ranked = torch.argsort(x[rows] @ centroids.T, dim=1, descending=True, stable=True)
            labels[rows] = ranked.gather(1, tried[rows, None]).squeeze(1)
    return labels


def _over_cap(labels: Tensor, fit: Tensor, cap: int) -> Tensor:
    """The rows to move on: in each column over `cap`, all but its `cap` most similar rows (the
    first in row order among equals). Shapes: labels, fit [N] -> [N] bool."""
    counts = torch.bincount(labels)
    if len(counts) == 0 or counts.max() <= cap:
        return torch.zeros_like(labels, dtype=torch.bool)
    order = torch.argsort(-fit, stable=True)
    order = order[torch.argsort(labels[order], stable=True)]  # by column, best fit first
    start = torch.cumsum(counts, dim=0) - counts
    rank = torch.empty_like(labels)
    rank[order] = torch.arange(len(labels)) - start[labels[order]]
    return rank >= cap


def capacity_limit(n: int, k: int, capacity: float | None) -> int:
    """The most of `n` points one of `k` clusters may hold (`KMeansConfig.capacity`)."""
    return n if capacity is None else max(math.ceil(capacity * n / k), math.ceil(n / k))


def _kmeans_plus_plus(x: Tensor, k: int, generator: torch.Generator) -> Tensor:
    """k-means++ seeding with cosine distance 1 - x.c: spread-out starting centroids."""
    chosen = [int(torch.randint(len(x), (1,), generator=generator))]
    distance = (1 - x @ x[chosen[0]]).clamp_min(0)
    for _ in range(1, k):
        total = float(distance.sum())
        if total <= 0:  # every point coincides with a centroid: any point will do
            chosen.append(int(torch.randint(len(x), (1,), generator=generator)))
        else:
            chosen.append(int(torch.multinomial(distance / total, 1, generator=generator)))
        distance = torch.minimum(distance, (1 - x @ x[chosen[-1]]).clamp_min(0))
    return x[chosen].clone()


def _lloyd(x: Tensor, centroids: Tensor, iterations: int, cap: int) -> Tensor:
    """Assign to the nearest centroid with room, move each centroid to its members' normalised
    mean; an emptied cluster restarts at the point its current centroid explains worst."""
    labels = torch.full((len(x),), -1, dtype=torch.long)
    for _ in range(iterations):
        similarity = x @ centroids.T
        new_labels = capped_argmax(similarity, cap)
        fit = similarity.gather(1, new_labels[:, None]).squeeze(1)
        if torch.equal(new_labels, labels):
            break
        labels = new_labels
        sums = torch.zeros_like(centroids).index_add_(0, labels, x)
        counts = torch.bincount(labels, minlength=len(centroids))
        centroids = F.normalize(sums, dim=1)
        for empty in (counts == 0).nonzero().flatten().tolist():
            worst = int(fit.argmin())
            centroids[empty] = x[worst]
            fit[worst] = 1.0
    return centroids


def _nonempty(x: Tensor, centroids: Tensor, cap: int) -> Clusters:
    """Final assignment to the returned centroids; clusters left without a point are dropped."""
    labels = capped_argmax(x @ centroids.T, cap)
    used = torch.bincount(labels, minlength=len(centroids)) > 0
    relabel = torch.cumsum(used, dim=0) - 1
    return Clusters(centroids[used], relabel[labels])


@contextmanager
def one_thread() -> Iterator[None]:
    """Tree building is thousands of small matmuls, where waking threads costs more than they
    save: on a loaded 2-core machine the synthetic tree took 38 s with two threads, 0.2 s with one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
