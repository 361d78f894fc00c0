"""Interest primitives at L levels as a tree: divisive spherical k-means over the item embeddings.

Items carry the interest semantics (what is bought), so the tree is grown on them: level 0 is
k-means over all items, and every level-l primitive is split into children by k-means over its
own items, so each finer primitive has exactly one parent and its centroid lies in the same unit
sphere as every entity. Users and advertisers are placed in the tree afterwards (`tokens.py`).

Sizes follow the data unless given: the finest level holds about one primitive per
`items_per_leaf` items, the coarsest about the square root of that (each coarse primitive then has
about as many finest descendants as there are coarse primitives), and the levels in between are
geometric. Complete Journey (92k products): 62 / 488 / 3847; the synthetic world (3k): 11 / 37 / 125.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from hier_pipeline.interests.kmeans import KMeansConfig, one_thread, spherical_kmeans

CHUNK = 4096  # entities scored at once: CHUNK x primitives similarities in memory


@dataclass(frozen=True)
class HierarchyConfig:
    levels: int = 3
    items_per_leaf: int = 24
    # Primitives per level, coarse -> fine (overrides `levels`); None: sized from the data.
    sizes: tuple[int, ...] | None = None
    seed: int = 0
    kmeans: KMeansConfig = field(default_factory=KMeansConfig)


def level_sizes(num_items: int, config: HierarchyConfig) -> tuple[int, ...]:
    """Primitives per level, coarse -> fine (the rule in the module docstring)."""
    if config.sizes is not None:
        if len(config.sizes) < 1 or any(b < a for a, b in itertools.pairwise(config.sizes)):
            raise ValueError(f"level sizes must be non-empty and non-decreasing: {config.sizes}")
        return tuple(config.sizes)
    finest = max(1, round(num_items / config.items_per_leaf))
    if config.levels == 1:
        return (finest,)
    coarsest = max(1, round(math.sqrt(finest)))
    steps = config.levels - 1
    return tuple(
        round(coarsest * (finest / coarsest) ** (level / steps)) for level in range(config.levels)
    )


@dataclass(frozen=True)
class InterestHierarchy:
    """Primitives of all levels in one index space, level 0 first.

    Primitive t of level l has index offsets[l] <= t < offsets[l + 1]; `parent[t]` is a primitive
    of level l - 1 (-1 at level 0); `members[i, l]` is item i's primitive at level l.

    Shapes: centroids [T, d] unit norm, parent [T], members [items, L].
    """

    centroids: Tensor
    parent: Tensor
    offsets: tuple[int, ...]
    token_ids: list[str]
    members: Tensor

    @property
    def levels(self) -> int:
        return len(self.offsets) - 1

    def level(self, level: int) -> slice:
        return slice(self.offsets[level], self.offsets[level + 1])

    def primitives_per_level(self) -> tuple[int, ...]:
        return tuple(b - a for a, b in itertools.pairwise(self.offsets))

    def level_of(self) -> Tensor:
        """The level of every primitive. Shapes: [T]."""
        return torch.repeat_interleave(
            torch.arange(self.levels), torch.tensor(self.primitives_per_level())
        )

    def sizes(self) -> Tensor:
        """Items whose path passes through each primitive. Shapes: [T]."""
        return torch.bincount(self.members.flatten(), minlength=len(self.parent))

    def path(self, vectors: Tensor) -> Tensor:
        """Each vector's primitive per level by greedy descent. Shapes: [N, d] -> [N, L]."""
        return descend(vectors, self.centroids, self.parent, self.offsets)

    def violations(self) -> dict[str, int]:
        """Counts of broken tree invariants (all zero for a valid tree)."""
        level_of = self.level_of()
        parent_level = torch.where(self.parent >= 0, level_of[self.parent.clamp_min(0)], -1)
        nested = self.parent[self.members[:, 1:]] == self.members[:, :-1]
        member_level = level_of[self.members] == torch.arange(self.levels)[None, :]
        return {
            "parent_not_one_level_up": int((parent_level != level_of - 1).sum()),
            "item_path_not_nested": int((~nested).sum()),
            "item_primitive_at_wrong_level": int((~member_level).sum()),
            "empty_primitives": int((self.sizes() == 0).sum()),
            "not_unit_norm": int(((self.centroids.norm(dim=1) - 1).abs() > 1e-4).sum()),
            "duplicate_token_ids": len(self.token_ids) - len(set(self.token_ids)),
        }


def build_hierarchy(
    items: Tensor, config: HierarchyConfig = HierarchyConfig()
) -> InterestHierarchy:
    """Grow the tree on unit-norm item embeddings. Deterministic for a given seed.

    Children are ordered by size (largest first, ties by their first item), so token ids are
    stable for a seed. Shapes: items [N, d] -> see `InterestHierarchy`.
    """
    with one_thread():
        centroids, parent, offsets = _grow(items, level_sizes(len(items), config), config)
    members = descend(items, centroids, parent, offsets)
    return InterestHierarchy(centroids, parent, offsets, token_ids(parent, offsets), members)


def _grow(
    items: Tensor, sizes: tuple[int, ...], config: HierarchyConfig
) -> tuple[Tensor, Tensor, tuple[int, ...]]:
    """(centroids, parent, offsets), level by level: each primitive's items split by k-means."""
    generator = torch.Generator().manual_seed(config.seed)
    centroids: list[Tensor] = []
    parents: list[Tensor] = []
    offsets = [0]
    parent_ids = [-1]  # a virtual root above level 0 ...
    groups = [torch.arange(len(items))]  # ... and the items under each primitive of the level above
    for size in sizes:
        level_centroids, level_parents, next_groups = [], [], []
        for parent_id, members, children in zip(
            parent_ids, groups, _allocate(size, groups), strict=True
        ):
            clusters = spherical_kmeans(items[members], children, generator, config.kmeans)
            order = _child_order(clusters.labels, len(clusters.centroids))
            level_centroids.append(clusters.centroids[order])
            level_parents.append(torch.full((len(order),), parent_id))
            next_groups += [members[clusters.labels == c] for c in order.tolist()]
        centroids.append(torch.cat(level_centroids))
        parents.append(torch.cat(level_parents))
        parent_ids = list(range(offsets[-1], offsets[-1] + len(centroids[-1])))
        offsets.append(parent_ids[-1] + 1)
        groups = next_groups
    return torch.cat(centroids), torch.cat(parents), tuple(offsets)


def descend(vectors: Tensor, centroids: Tensor, parent: Tensor, offsets: tuple[int, ...]) -> Tensor:
    """Greedy descent: the nearest level-0 primitive, then the nearest of its children, and so on.
    For the items a tree was grown on this reproduces their clusters (k-means labels are nearest
    centroids), so an item's path and its cluster memberships are one and the same.

    Shapes: vectors [N, d] unit norm -> [N, L] primitive indices.
    """
    parts = []
    for start in range(0, len(vectors), CHUNK):
        chunk = vectors[start : start + CHUNK]
        steps: list[Tensor] = []
        for level in range(len(offsets) - 1):
            lo, hi = offsets[level], offsets[level + 1]
            scores = chunk @ centroids[lo:hi].T
            if level:
                scores = scores.masked_fill(parent[None, lo:hi] != steps[-1][:, None], -torch.inf)
            steps.append(scores.argmax(dim=1) + lo)
        parts.append(torch.stack(steps, dim=1))
    if not parts:
        return torch.zeros(0, len(offsets) - 1, dtype=torch.long)
    return torch.cat(parts)


def _allocate(total: int, groups: list[Tensor]) -> list[int]:
    """Children per parent, proportional to its items (largest remainder), at least one each and
    never more than its items: a big interest is split finer than a small one."""
    counts = torch.tensor([len(g) for g in groups], dtype=torch.float64)
    quota = total * counts / counts.sum()
    children = quota.floor().clamp(min=1).minimum(counts)
    remainder = quota - quota.floor()
    for index in torch.argsort(-remainder, stable=True).tolist():
        if children.sum() >= total:
            break
        if children[index] < counts[index]:
            children[index] += 1
    return [int(c) for c in children]


def _child_order(labels: Tensor, k: int) -> Tensor:
    """Cluster ids sorted by size (descending), ties by their first member."""
    size = torch.bincount(labels, minlength=k)
    first = torch.full((k,), len(labels), dtype=torch.long).scatter_reduce(
        0, labels, torch.arange(len(labels)), reduce="amin"
    )
    key = -size * (len(labels) + 1) + first
    return torch.argsort(key)


def token_ids(parent: Tensor, offsets: tuple[int, ...]) -> list[str]:
    """Path-encoded ids: `L0:07`, `L1:07.3`, `L2:07.3.12`; each part is the primitive's rank among
    its siblings, zero-padded to the widest rank of its level."""
    paths: list[str] = []
    ids: list[str] = []
    for level in range(len(offsets) - 1):
        primitives = range(offsets[level], offsets[level + 1])
        siblings: dict[int, int] = {}
        ranks = []
        for t in primitives:
            ranks.append(siblings.get(int(parent[t]), 0))
            siblings[int(parent[t])] = ranks[-1] + 1
        width = len(str(max(ranks, default=0)))
        for t, rank in zip(primitives, ranks, strict=True):
            part = f"{rank:0{width}d}"
            paths.append(part if level == 0 else f"{paths[int(parent[t])]}.{part}")
            ids.append(f"L{level}:{paths[-1]}")
    return ids
