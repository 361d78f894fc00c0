"""Interest primitives at L levels as a tree of semantic IDs over the items.

Items carry the interest semantics (what is bought), so the tree is grown on them (`growth.py`):
the finest level quantises the vector `fusion.py` makes of each item's content and its model
embedding, and each coarser level merges the interests below it that the same users engage with.
A level-l token is the prefix of an item's code down to level l: each finer primitive has exactly
one parent, and a new product is placed by its content before anyone has engaged with it.

A primitive's centroid is the normalised mean of its items' model embeddings: users and
advertisers live in that space, so they are placed in the tree by it (`tokens.py`), and for a
tree grown without content the two spaces coincide.

Sizes follow the data unless given: the finest level holds about one primitive per
`items_per_leaf` items, the coarsest about the square root of that (each coarse primitive then has
about as many finest descendants as there are coarse primitives), and the levels in between are
geometric. Complete Journey (92k products): 62 / 488 / 3847; the synthetic world (3k): 11 / 37 / 125.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from hier_pipeline.interests.codebook import ItemCodebook
from hier_pipeline.interests.events import FunnelEvents
from hier_pipeline.interests.fusion import ItemFusion
from hier_pipeline.interests.growth import GrowthConfig, grow, nested_tree, warm_labels
from hier_pipeline.interests.kmeans import KMeansConfig, one_thread

CHUNK = 4096  # entities scored at once: CHUNK x primitives similarities in memory


@dataclass(frozen=True)
class HierarchyConfig:
    levels: int = 3
    items_per_leaf: int = 24
    # Primitives per level, coarse -> fine (overrides `levels`); None: sized from the data.
    sizes: tuple[int, ...] | None = None
    seed: int = 0
    kmeans: KMeansConfig = field(default_factory=KMeansConfig)
    # Share of the tree's metric taken by content (`fusion.py`); ignored without content.
    content_weight: float = 0.8
    # Co-engagement's shares of the coarser levels' merge profile to choose from on held-out
    # events (`merge.py`; the rest is content): content alone, the same for every training
    # seed, unless co-engagement alone retrieves clearly better (a blend, 0.5, was never
    # clearly better than both and flipped with the training seed on the synthetic world).
    merge_shares: tuple[float, ...] = (0.0, 1.0)
    # Content modalities ("text", "image") the finest codes read; None: every one the items
    # have, unless one alone retrieves held-out events clearly better (`growth.grow`). A refit
    # reads the serving tree's.
    modalities: tuple[str, ...] | None = None
    # A refit from the serving tree keeps an item in its code unless another fits it by more
    # than this (cosine in the fused space; `growth.warm_labels`).
    refit_margin: float = 0.02


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
    # The finest codes in the space the tree grew in (`codebook.py`); None for a tree grown
    # before trees kept one: its later items are then placed by embedding.
    codebook: ItemCodebook | None = None
    # Co-engagement's share of what the coarser levels merged on (`merge.py`); None for a tree
    # refitted from the serving one (its coarse levels are kept) or from an older file.
    merge_share: float | None = None

    @property
    def levels(self) -> int:
        return len(self.offsets) - 1

    def level(self, level: int) -> slice:
        return slice(self.offsets[level], self.offsets[level + 1])

    def primitives_per_level(self) -> tuple[int, ...]:
        return tuple(b - a for a, b in itertools.pairwise(self.offsets))

    @property
    def modalities(self) -> tuple[str, ...] | None:
        """The content modalities its finest codes read (None: a tree without a codebook)."""
        return None if self.codebook is None else self.codebook.fusion.modalities

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

    def item_codes(self, behaviour: Tensor, content: Mapping[str, Tensor] | None) -> Tensor:
        """The codes of items that arrived after the tree grew: the nearest finest code to their
        fused content and embedding, and its ancestors (by embedding alone without a codebook).
        Shapes: behaviour [N, d] unit norm, content rows aligned with it -> [N, L]."""
        if self.codebook is None:
            return self.path(behaviour)
        path = [self.codebook.finest(behaviour, content)]
        for _ in range(self.levels - 1):
            path.insert(0, self.parent[path[0]])
        return torch.stack(path, dim=1)

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
    items: Tensor,
    config: HierarchyConfig = HierarchyConfig(),
    content: Mapping[str, Tensor] | None = None,
    events: FunnelEvents | None = None,
    previous: Tensor | None = None,
) -> InterestHierarchy:
    """Grow the tree (`growth.py`) on the items' model embeddings fused with their content
    (`content`: the item table's content tensors, rows in node order; None: embeddings alone),
    its coarser levels from who engaged with which item (`events`). Deterministic for a given
    seed. `previous`: each item's primitives in the serving tree (`members`; -1 rows for new
    items), which is refitted (`growth.warm_labels`) instead of a tree grown afresh.
    Shapes: items [N, d] unit norm, previous [N, L] -> see `InterestHierarchy`.
    """
    share: float | None = None  # a refit keeps the serving tree's coarse levels: no merge
    with one_thread():
        if previous is None:
            settings = GrowthConfig(
                config.seed,
                config.content_weight,
                config.modalities,
                config.kmeans,
                config.merge_shares,
            )
            grown = grow(items, content, level_sizes(len(items), config), events, settings)
            fusion, fused, labels, share = grown.fusion, grown.fused, grown.labels, grown.share
        else:
            fusion = ItemFusion.of(content, config.content_weight, config.modalities)
            fused = fusion(items, content)
            labels = warm_labels(fused, previous, config.kmeans.capacity, config.refit_margin)
    parent, offsets, members = nested_tree(labels)
    first, codes = offsets[-2], offsets[-1] - offsets[-2]
    return InterestHierarchy(
        member_means(items, members, len(parent)),
        parent,
        offsets,
        token_ids(parent, offsets),
        members,
        ItemCodebook(fusion, member_means(fused, members[:, -1:] - first, codes), first),
        share,
    )


def member_means(items: Tensor, members: Tensor, count: int) -> Tensor:
    """Each primitive's centroid: the normalised mean of its items' vectors (a primitive without
    items gets a zero row). Shapes: items [N, d], members [N, L] -> [count, d]."""
    sums = torch.zeros(count, items.shape[1], dtype=items.dtype)
    for level in range(members.shape[1]):
        sums.index_add_(0, members[:, level], items)
    return F.normalize(sums, dim=1)


def descend(vectors: Tensor, centroids: Tensor, parent: Tensor, offsets: tuple[int, ...]) -> Tensor:
    """Greedy descent: the nearest level-0 primitive, then the nearest of its children, and so on:
    where a vector not in the tree (a user, an advertiser, an item that arrived later) belongs.
    For a tree grown on embeddings alone, without a binding capacity limit, it reproduces the
    items' own clusters.

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
