"""What the tree's coarser levels merge the finer codes by, chosen on held-out events.

Two signals say which fine interests belong together: who engages with them (co-engagement) and
what they are (their items' content). Which one is right is a property of the data. On the
synthetic world, people who buy trail shoes buy running socks while the texts differ in every
word, so co-engagement recovers the planted coarse interests (AMI 0.80) and content does not
(0.18). On Complete Journey a grocery basket crosses every department while the texts name them,
so content recovers the departments (AMI 0.48) and co-engagement does not (0.25). A merge profile
weighs the two, cos = a cos(co-engagement) + (1 - a) cos(content), and `a` is the share among
`HierarchyConfig.merge_shares` whose tree best retrieves held-out events: the coarser levels
merged on the events before the last tenth of them, each user's share of their events per token
from the same events, items scored by the tokens they share with the user (a level-l token
counting 2^l, as token retrieval does), recall@50 of the events after the cut (every stage:
the deepest alone, coupon redemptions on Complete Journey, is too rare to decide on).

Content (a = 0) merges unless co-engagement (a = 1) retrieves clearly better. Content is the
same for every training seed and every retrain, so a coarse level merged on it survives a
retrain; one merged on co-engagement moves with the finest codes, which move with the model.
Measured on two or three training seeds' vectors (held-out recall@50 for a = 1 / 0.5 / 0, the
paired gain of a = 1 over content in standard errors): the synthetic world 0.187-0.193 /
0.184-0.194 / 0.169-0.179, +5.4 to +7.2 SE, so co-engagement merges (AMI against the planted
coarse level 0.76-0.85, against 0.18-0.29 for content); Complete Journey 0.043 / 0.044 / 0.045,
no share ahead, so content merges (ARI between two training seeds' trees 0.75 / 0.87 / 0.74 per
level, AMI against the departments 0.47; with co-engagement first, as before, 0.21 / 0.35 /
0.74 and 0.24: the coarse levels followed each seed's baskets). The blend, a = 0.5, is not a
default: it never beat both, and against co-engagement it led for one synthetic seed and
trailed for two, so a choice including it flipped with the seed (docs/interests.md).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hier_pipeline.interests.events import FunnelEvents

HELD_OUT = 0.1  # the last share of the events, by time, that the choice is scored on
MAX_USERS = 2000  # scored users at most, drawn by the tree's seed
TOP_K = 50
CHUNK = 256  # users scored at once: CHUNK x items floats
SIGNIFICANCE = 2.0  # standard errors a share must gain over the first to be chosen


def merge_levels(
    fused: Tensor, finest: Tensor, sizes: tuple[int, ...], events: FunnelEvents | None, share: float
) -> Tensor:
    """Each coarser level by Ward's linkage of the level below's profiles (`profiles`).
    Shapes: fused [N, D], finest [N] -> [N, L] labels, coarse -> fine."""
    labels = [finest]
    for size in reversed(sizes[:-1]):
        groups = ward_groups(profiles(fused, labels[0], events, share), size)
        labels.insert(0, groups[labels[0]])
    return torch.stack(labels, dim=1)


def profiles(fused: Tensor, labels: Tensor, events: FunnelEvents | None, share: float) -> Tensor:
    """Per token (label), the unit vector its coarser level is clustered on: its co-engagement
    profile (the users who engaged with its items: square-rooted counts, so a few heavy users do
    not define an interest; centred on the mean profile, so popularity is not a direction)
    weighted `share`, its items' mean fused vector weighted 1 - `share`; the latter alone without
    events. Dense: k x users floats (Complete Journey: 3847 x 2.5k).
    Shapes: fused [N, D], labels [N] in 0..k-1 -> [k, users + D]."""
    count = int(labels.max()) + 1
    content = F.normalize(torch.zeros(count, fused.shape[1]).index_add_(0, labels, fused), dim=1)
    if events is None or len(events) == 0:
        return content
    users = int(events.users.max()) + 1
    counts = torch.zeros(count, users).index_put_(
        (labels[events.items], events.users), torch.ones(len(events)), accumulate=True
    )
    engaged = F.normalize(counts.sqrt(), dim=1)
    engaged = F.normalize(engaged - engaged.mean(dim=0), dim=1)
    return torch.cat([engaged * share**0.5, content * (1 - share) ** 0.5], dim=1)


def ward_groups(profiles: Tensor, count: int) -> Tensor:
    """At most `count` groups of the rows by Ward's linkage (Euclidean between unit rows: cosine).
    Shapes: profiles [k, D] -> [k] in 0..count'-1."""
    from scipy.cluster.hierarchy import fcluster, linkage  # here: queries never grow a tree

    if len(profiles) <= count:
        return torch.arange(len(profiles))
    tree = linkage(profiles.double().numpy(), method="ward")
    groups = fcluster(tree, count, criterion="maxclust") - 1
    return torch.as_tensor(groups, dtype=torch.long)


def choose_share(
    fused: Tensor,
    finest: Tensor,
    sizes: tuple[int, ...],
    events: FunnelEvents | None,
    shares: tuple[float, ...],
    generator: torch.Generator,
) -> tuple[float, dict[float, float]]:
    """The share whose merges retrieve the held-out events best (module docstring), and each
    share's recall@50. The first share unless another beats it clearly (its paired gain over
    the users above `SIGNIFICANCE` standard errors: a few hundred users cannot tell close
    shares apart, and a choice that flips between training seeds would reshuffle the coarse
    tokens), where there is one share, or no events to hold out: put the most stable first."""
    if len(shares) == 1 or events is None or len(events) == 0:
        return shares[0], {}
    cut = int(np.quantile(events.time.numpy(), 1 - HELD_OUT))
    before = events.time < cut
    earlier, later = events.where(before), events.where(~before)
    both = np.intersect1d(earlier.users.unique().numpy(), later.users.unique().numpy())
    if len(both) == 0:
        return shares[0], {}
    drawn = torch.randperm(len(both), generator=generator)[:MAX_USERS]
    users = torch.from_numpy(both)[drawn.sort().values]
    targets = later.of_users(users)
    per_user = {
        share: _token_recall(
            merge_levels(fused, finest, sizes, earlier, share), earlier, users, targets
        )
        for share in shares
    }
    recall = {share: float(values.mean()) for share, values in per_user.items()}
    best = max(shares, key=lambda share: recall[share])
    gain = per_user[best] - per_user[shares[0]]
    clear = float(gain.mean()) > SIGNIFICANCE * float(gain.std()) / len(gain) ** 0.5
    return (best if clear else shares[0]), recall


def _token_recall(
    labels: Tensor, earlier: FunnelEvents, users: Tensor, targets: FunnelEvents
) -> Tensor:
    """Per user, recall@`TOP_K` of `targets` (users renumbered to rows of `users`) when items are
    ranked by the tokens they share with the user's earlier events (weights 2^stage), a level-l
    token counting 2^l; ties by the items' earlier event counts."""
    items, levels = labels.shape
    popularity = torch.bincount(earlier.items, minlength=items).double()
    tie_break = popularity / (popularity.max() + 1) * 1e-6
    mine = earlier.of_users(users)
    weight = 2.0 ** mine.stage.double()
    truth = torch.zeros(len(users), items, dtype=torch.bool)
    truth[targets.users, targets.items] = True
    recalls = []
    for start in range(0, len(users), CHUNK):
        rows = slice(start, min(start + CHUNK, len(users)))
        chosen = (mine.users >= rows.start) & (mine.users < rows.stop)
        scores = tie_break.repeat(rows.stop - rows.start, 1)
        for level in range(levels):
            code = labels[:, level]
            shares = torch.zeros(rows.stop - rows.start, int(code.max()) + 1, dtype=torch.float64)
            shares.index_put_(
                (mine.users[chosen] - rows.start, code[mine.items[chosen]]),
                weight[chosen],
                accumulate=True,
            )
            shares /= shares.sum(dim=1, keepdim=True).clamp_min(1e-300)
            scores += 2.0**level * shares[:, code]
        top = scores.topk(TOP_K, dim=1).indices
        hits = truth[rows].gather(1, top).sum(dim=1).double()
        recalls.append(hits / truth[rows].sum(dim=1).clamp_min(1))
    return torch.cat(recalls)
