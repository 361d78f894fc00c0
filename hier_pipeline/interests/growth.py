"""How the interest tree grows: fine semantic codes from the items' fused vectors, then each
coarser level by merging the level below's interests that the same users engage with.

Why bottom-up. Quantising top-down (level 0 first, each finer level the residual within its
parent: TIGER's residual quantisation with a codebook per parent) puts at the top whatever
separates items most, and in content space that is the fine interest: "trail running shoes" and
"road running shoes" differ in every word of their descriptions, "sports" and "kitchen" in one.
On the synthetic world, top-down over fused vectors scored AMI 0.12-0.38 against the planted
coarse interests while the finest level reached 0.92. What groups fine interests into broader
ones is often who engages with them: a user of trail shoes also buys running socks. So the
finest level quantises the fused vectors (content fixes what a product is; behaviour refines it),
and every coarser level merges the tokens of the level below (`merge.py`): by their
co-engagement profile, the users who engaged with their items, by their items' content, or by a
blend of the two, whichever retrieves held-out events clearly better (content, the same for
every training seed, unless another does). The merge is Ward's agglomerative clustering of
the unit profiles: deterministic, so a coarse level depends on the finest codes and the events
only, never on a k-means seed (on the synthetic world, k-means merges agreed with the planted
coarse interests as well, AMI 0.73-0.75, but only 0.50 ARI across training seeds; Ward:
0.80-0.83 and 0.72-0.80).

The finest codes themselves are found top-down, by residual quantisation with a codebook per
parent (each level's codebook splits its parent's items; the residual within a parent is the
item minus a point all of them share, so each codebook is k-means over the parent's items): a
flat k-means into thousands of codes is both slower (92k items x 3847 codes x every iteration)
and more prone to local optima (two planted interests merged, another split) than splits of a few
ways each. Only the finest level of that descent is kept. Every clustering is capacity-limited
spherical k-means (`kmeans.py`), and the label of a finer token decides its items' coarser
labels, so each finer token has exactly one parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from hier_pipeline.interests.events import FunnelEvents
from hier_pipeline.interests.fusion import ItemFusion, present_modalities
from hier_pipeline.interests.held_out import HeldOut, first_unless_clearly_beaten
from hier_pipeline.interests.kmeans import (
    KMeansConfig,
    capacity_limit,
    spherical_kmeans,
    streamed_capped_argmax,
)
from hier_pipeline.interests.merge import choose_share, merge_levels


@dataclass(frozen=True)
class GrowthConfig:
    """What `grow` reads of `HierarchyConfig` (the fields of the same names)."""

    seed: int
    content_weight: float
    modalities: tuple[str, ...] | None
    kmeans: KMeansConfig
    merge_shares: tuple[float, ...]


@dataclass(frozen=True)
class Grown:
    """A tree grown afresh: the fusion its finest codes read, the items' fused vectors, their
    labels per level (coarse -> fine, nested) and co-engagement's share of the merges."""

    fusion: ItemFusion
    fused: Tensor
    labels: Tensor
    share: float


def grow(
    items: Tensor,
    content: Mapping[str, Tensor] | None,
    sizes: tuple[int, ...],
    events: FunnelEvents | None,
    config: GrowthConfig,
) -> Grown:
    """Each item's cluster per level, coarse -> fine, nested (items with the same fine label
    share every coarser one); labels are 0..k-1 per level in no particular order.

    Which content modalities the finest codes read is chosen on held-out events
    (`held_out.py`): every modality the items have, unless one alone retrieves clearly better
    (on the synthetic world, whose rendered images an ImageNet encoder reads poorly, text
    alone: held-out recall@50 0.205-0.215 against 0.187-0.193 with the images, three training
    seeds, and the planted coarse interests' AMI 0.86-0.91 against 0.76-0.85). Under each
    option, the coarser levels merge on the co-engagement share among `config.merge_shares`
    that the same events choose (`merge.py`). Each option's finest codes are grown from the
    same seed, so the chosen tree is the one its modalities would grow alone.

    Shapes: items [N, d] unit norm, content rows aligned with them, `events` index its rows.
    """
    held_out = HeldOut.of(events, config.seed)
    options = candidate_modalities(content, config.modalities)
    grown, recalls = [], []
    for modalities in options:
        fusion = ItemFusion.of(content, config.content_weight, modalities)
        fused = fusion(items, content)
        generator = torch.Generator().manual_seed(config.seed)
        finest = finest_codes(fused, sizes, generator, config.kmeans)
        share, by_share = choose_share(fused, finest, sizes, held_out, config.merge_shares)
        grown.append((fusion, fused, finest, share))
        if held_out is not None and len(options) > 1:
            recall = by_share.get(share)
            if recall is None:
                recall = held_out.recall(
                    merge_levels(fused, finest, sizes, held_out.earlier, share)
                )
            recalls.append(recall)
    fusion, fused, finest, share = grown[first_unless_clearly_beaten(recalls) if recalls else 0]
    return Grown(fusion, fused, merge_levels(fused, finest, sizes, events, share), share)


def candidate_modalities(
    content: Mapping[str, Tensor] | None, fixed: tuple[str, ...] | None
) -> list[tuple[str, ...]]:
    """The modality sets to choose from, the first preferred: `fixed` where given, else every
    modality the items have, then each alone where they have several."""
    present = present_modalities(content)
    if fixed is not None:
        return [tuple(m for m in present if m in fixed)]
    return [present, *((m,) for m in present)] if len(present) > 1 else [present]


def finest_codes(
    fused: Tensor, sizes: tuple[int, ...], generator: torch.Generator, config: KMeansConfig
) -> Tensor:
    """Top-down quantisation through `sizes` (coarse -> fine) codes; the finest level's label
    per item. Shapes: fused [N, D] -> [N] in 0..sizes[-1]-1 (fewer with duplicate rows)."""
    groups = [torch.arange(len(fused))]
    for size in sizes:
        groups = [
            group[clusters.labels == c]
            for group, children in zip(groups, _allocate(size, groups), strict=True)
            for clusters in [spherical_kmeans(fused[group], children, generator, config)]
            for c in range(len(clusters.centroids))
        ]
    labels = torch.empty(len(fused), dtype=torch.long)
    for code, group in enumerate(groups):
        labels[group] = code
    return labels


def warm_labels(fused: Tensor, previous: Tensor, capacity: float | None, margin: float) -> Tensor:
    """The serving tree refitted to new vectors: each of its finest codes is re-centred on its
    items' new fused vectors (the embedding space of a retrained model is another space, the
    items are the same), every item goes to its best code with room (`capped_argmax`) but stays
    in its serving code unless the best fits it by more than `margin` cosine (`capacity`: as
    `KMeansConfig.capacity`; an item kept by the margin may overfill its code), and every code
    keeps its place under the serving tree's coarser primitives. Items the serving tree did not
    have take their best code. So a token keeps its members, and its meaning, unless the new
    vectors clearly move them, and a coarse level changes only as far as its codes' items do
    (merging anew from slightly different codes would reshuffle whole branches). A code none of
    whose items remain is retired.

    Why one assignment with a margin, not k-means run on from the serving codes: on Complete
    Journey, a retrain on 1% more events with another training seed's model kept 91% of the
    finest ids (Jaccard >= 0.5) after 50 Lloyd iterations, 93% after one, 98.5% with a margin of
    0.02 (co-engagement merges), AMI against the catalogue's taxonomy unchanged
    (docs/interests.md). A retrained model's vectors differ everywhere a little; iterations let
    those small moves add up.

    Shapes: fused [N, D], previous [N, L] -> [N, L].
    Memory: N x 16 code indices and one block of similarities (`streamed_capped_argmax`).
    """
    known = previous[:, -1] >= 0
    if not known.any():
        raise ValueError("no item of the serving tree is left to start from")
    codes, old = torch.unique(previous[known, -1], return_inverse=True)
    centroids = F.normalize(
        torch.zeros(len(codes), fused.shape[1]).index_add_(0, old, fused[known]), dim=1
    )
    cap = capacity_limit(len(fused), len(codes), capacity)
    best = streamed_capped_argmax(fused, centroids, cap)
    own = torch.full_like(best, -1)
    own[known] = old
    own_fit = (fused * centroids[own.clamp_min(0)]).sum(dim=1)
    best_fit = (fused * centroids[best]).sum(dim=1)
    stay = known & (own_fit >= best_fit - margin)
    fine = torch.where(stay, own, best)
    ancestors = torch.zeros(len(codes), previous.shape[1], dtype=torch.long)
    ancestors[old] = previous[known]  # every item of a code shares the code's ancestors
    return ancestors[fine]


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


def nested_tree(labels: Tensor) -> tuple[Tensor, tuple[int, ...], Tensor]:
    """(parent, offsets, members) of the tree the nested labels describe: primitives of a level
    grouped by parent, siblings ordered by size (largest first, ties by their first item), so
    that the same labels always give the same token ids.

    Shapes: labels [N, L] -> parent [T], members [N, L] (indices into the T primitives).
    """
    n, levels = labels.shape
    members = torch.zeros_like(labels)
    parents: list[Tensor] = []
    offsets = [0]
    previous = torch.full((n,), -1, dtype=torch.long)  # the virtual root above level 0
    for level in range(levels):
        key = previous * (n + 1) + labels[:, level]
        unique, inverse = torch.unique(key, return_inverse=True)
        size = torch.bincount(inverse, minlength=len(unique))
        first = torch.full((len(unique),), n, dtype=torch.long).scatter_reduce(
            0, inverse, torch.arange(n), reduce="amin"
        )
        parent_of = torch.zeros(len(unique), dtype=torch.long).scatter_(0, inverse, previous)
        order = torch.argsort(parent_of * (n + 1) ** 2 - size * (n + 1) + first)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(len(order))
        members[:, level] = offsets[-1] + rank[inverse]
        parents.append(parent_of[order])
        offsets.append(offsets[-1] + len(unique))
        previous = members[:, level]
    return torch.cat(parents), tuple(offsets), members
