"""What the tree's coarser levels merge the finer codes by, chosen on held-out events.

Two signals say which fine interests belong together: who engages with them (co-engagement) and
what they are (their items' content). Which one is right is a property of the data. On the
synthetic world, people who buy trail shoes buy running socks while the texts differ in every
word, so co-engagement recovers the planted coarse interests (AMI 0.90-0.91 on text codes) and
content recovers them less well (0.65-0.86). On Complete Journey a grocery basket crosses every
department while the texts name them, so content recovers the departments (AMI 0.47) and
co-engagement does not (0.25). A merge profile weighs the two, cos = a cos(co-engagement) +
(1 - a) cos(content), and `a` is the share among `HierarchyConfig.merge_shares` whose tree best
retrieves held-out events (`held_out.py`).

Content (a = 0) merges unless co-engagement (a = 1) retrieves clearly better. Content is the
same for every training seed and every retrain, so a coarse level merged on it survives a
retrain; one merged on co-engagement moves with the finest codes, which move with the model.
Measured on three training seeds' vectors (held-out recall@50 for a = 0 / 1, the paired gain of
a = 1 in standard errors): the synthetic world's text codes 0.200-0.214 / 0.205-0.215, +2.6,
+3.1 and +0.7 SE, so two seeds merge on co-engagement and one on content (with the images in
the codes, before `growth.grow` chose the modalities: +5.4 to +7.2 SE for every seed);
Complete Journey 0.045 / 0.043, no share ahead, so content merges (ARI between two training
seeds' trees 0.75 / 0.87 / 0.74 per level; with co-engagement first, as before, 0.21 / 0.35 /
0.74: the coarse levels followed each seed's baskets). The blend, a = 0.5, is not a default: it
never beat both, and a choice including it flipped with the seed (docs/interests.md).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hier_pipeline.interests.events import FunnelEvents
from hier_pipeline.interests.held_out import HeldOut, first_unless_clearly_beaten


def merge_levels(
    fused: Tensor, finest: Tensor, sizes: tuple[int, ...], events: FunnelEvents | None, share: float
) -> Tensor:
    """Each coarser level by Ward's linkage of the level below's tokens (`similarity`).
    Shapes: fused [N, D], finest [N] -> [N, L] labels, coarse -> fine."""
    labels = [finest]
    for size in reversed(sizes[:-1]):
        groups = ward_groups(similarity(fused, labels[0], events, share), size)
        labels.insert(0, groups[labels[0]])
    return torch.stack(labels, dim=1)


def similarity(fused: Tensor, labels: Tensor, events: FunnelEvents | None, share: float) -> Tensor:
    """Per pair of tokens (labels), the cosine their coarser level is clustered on: `share` x
    that of their co-engagement profiles (the users who engaged with a token's items:
    square-rooted counts, so a few heavy users do not define an interest; centred on the mean
    profile, so popularity is not a direction) plus 1 - `share` x that of their items' mean
    fused vectors; the latter alone without events. The profiles are never held whole
    (`_centred_cosine`): tokens x tokens, which Ward's linkage holds anyway, not tokens x users.
    Shapes: fused [N, D], labels [N] in 0..k-1 -> [k, k] float64."""
    count = int(labels.max()) + 1
    content = F.normalize(torch.zeros(count, fused.shape[1]).index_add_(0, labels, fused), dim=1)
    cosine = (content @ content.T).double()
    if events is None or len(events) == 0 or share == 0:  # no co-engagement to weigh
        return cosine
    engaged = _centred_cosine(labels[events.items], events.users, count)
    return engaged.mul_(share).add_(cosine, alpha=1 - share)


def _centred_cosine(rows: Tensor, columns: Tensor, count: int, block: int = 1 << 24) -> Tensor:
    """The cosines between the `count` rows of P = E - mean row of E, where E is the row-normalised
    square root of the (row, column) pair counts, from E's Gram matrix, summed over blocks of
    columns of `block` cells at most: P P' = E E' - (E m) 1' - 1 (E m)' + m'm. Memory: count^2
    plus one block, whatever the number of columns (users). Shapes: rows, columns [E] ->
    [count, count]."""
    norms = torch.bincount(rows, minlength=count).float().sqrt().clamp_min(1e-12)
    order = torch.argsort(columns, stable=True)
    rows, columns = rows[order], columns[order]
    width = int(columns.max()) + 1
    step = max(1, block // count)
    gram = torch.zeros(count, count, dtype=torch.float64)
    toward_mean = torch.zeros(count, dtype=torch.float64)
    mean_square = 0.0
    for start in range(0, width, step):
        stop = min(start + step, width)
        lo, hi = torch.searchsorted(columns, torch.tensor([start, stop])).tolist()
        part = torch.zeros(count, stop - start)
        part.index_put_((rows[lo:hi], columns[lo:hi] - start), torch.ones(hi - lo), accumulate=True)
        part = part.sqrt_() / norms[:, None]
        mean = part.mean(dim=0)
        gram += (part @ part.T).double()  # float32 products (BLAS), summed in float64
        toward_mean += (part @ mean).double()
        mean_square += float(mean.double() @ mean.double())
    gram.sub_(toward_mean[:, None]).sub_(toward_mean[None, :]).add_(mean_square)
    length = gram.diagonal().clamp_min(0).sqrt().clamp_min(1e-12)
    return gram.div_(length[:, None]).div_(length[None, :])


def ward_groups(cosine: Tensor, count: int) -> Tensor:
    """At most `count` groups of the rows by Ward's linkage of their Euclidean distances as unit
    vectors, sqrt(2 - 2 cos). Shapes: cosine [k, k] -> [k] in 0..count'-1."""
    from scipy.cluster.hierarchy import fcluster, linkage  # here: queries never grow a tree

    if len(cosine) <= count:
        return torch.arange(len(cosine))
    tree = linkage(condensed_distances(cosine), method="ward")
    groups = fcluster(tree, count, criterion="maxclust") - 1
    return torch.as_tensor(groups, dtype=torch.long)


def condensed_distances(cosine: Tensor) -> np.ndarray:
    """sqrt(2 - 2 cos) of each pair i < j, in scipy's condensed order, written row by row into
    one vector and converted there: no k x k distance matrix beside the cosines (the
    expression's temporaries held four, 2.2 GB each at 16,667 codes). Shapes: [k, k] ->
    [k (k - 1) / 2] float64."""
    k, rows = len(cosine), cosine.double().numpy()
    out = np.empty(k * (k - 1) // 2)
    start = 0
    for i in range(k - 1):
        out[start : start + k - 1 - i] = rows[i, i + 1 :]
        start += k - 1 - i
    torch.from_numpy(out).mul_(-2).add_(2).clamp_min_(0).sqrt_()  # in place, as torch rounds
    return out


def choose_share(
    fused: Tensor,
    finest: Tensor,
    sizes: tuple[int, ...],
    held_out: HeldOut | None,
    shares: tuple[float, ...],
) -> tuple[float, dict[float, Tensor]]:
    """The share whose merges retrieve the held-out events best (`held_out.py`), and each
    share's recall@50 per held-out user: the first share unless another beats it clearly, where
    there is one share, or no events to hold out: put the most stable first."""
    if held_out is None or len(shares) == 1:
        return shares[0], {}
    recalls = [
        held_out.recall(merge_levels(fused, finest, sizes, held_out.earlier, share))
        for share in shares
    ]
    return shares[first_unless_clearly_beaten(recalls)], dict(zip(shares, recalls, strict=True))
