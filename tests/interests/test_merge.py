"""What the coarser levels merge on, chosen on held-out events: co-engagement where the events
group the fine interests and the content does not, content where it is the other way round or
where the events cannot tell."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from hier_pipeline.interests import HierarchyConfig, build_hierarchy
from hier_pipeline.interests.events import FunnelEvents
from hier_pipeline.interests.held_out import HeldOut
from hier_pipeline.interests.merge import (
    _centred_cosine,
    choose_share,
    condensed_distances,
    similarity,
    ward_groups,
)
from hier_pipeline.interests.quality import level_agreement
from tests.interests.planted import planted_vectors

SHARES = HierarchyConfig().merge_shares  # content first
FINE, GROUPS, PER_FINE = 24, 4, 5


def _world(fine: torch.Tensor, group_of: torch.Tensor, earlier_interests: int) -> FunnelEvents:
    """Per user: views of `earlier_interests` fine interests of one group at time 0, then two
    purchases (the deepest stage) in another fine interest of that group at time 100."""
    generator = torch.Generator().manual_seed(0)
    rows: list[tuple[int, int, int, int]] = []
    for user in range(120):
        group = user % GROUPS
        interests = torch.nonzero(group_of == group).flatten()
        chosen = interests[torch.randperm(len(interests), generator=generator)]
        for interest in chosen[:earlier_interests]:
            rows += [(user, int(i), 0, 0) for i in torch.nonzero(fine == interest).flatten()]
        target = torch.nonzero(fine == chosen[earlier_interests]).flatten()[:2]
        rows += [(user, int(i), 1, 100) for i in target]
    return FunnelEvents(*(torch.tensor(column) for column in zip(*rows, strict=True)))


def _choice(x: torch.Tensor, events: FunnelEvents) -> tuple[float, dict[float, float]]:
    from hier_pipeline.interests.growth import finest_codes
    from hier_pipeline.interests.kmeans import KMeansConfig

    generator = torch.Generator().manual_seed(0)
    finest = finest_codes(x, (GROUPS, FINE), generator, KMeansConfig())
    share, recalls = choose_share(x, finest, (GROUPS, FINE), HeldOut.of(events, 0), SHARES)
    return share, {option: float(recall.mean()) for option, recall in recalls.items()}


def test_the_merge_follows_co_engagement_where_the_content_says_nothing_of_the_groups() -> None:
    x, truth = planted_vectors(branching=(FINE,), per_leaf=PER_FINE)
    fine = truth[:, 0]
    events = _world(fine, torch.arange(FINE) % GROUPS, earlier_interests=2)
    share, recall = _choice(x, events)
    assert share == 1.0 and recall[1.0] > recall[0.0] + 0.3, recall
    tree = build_hierarchy(x, HierarchyConfig(sizes=(GROUPS, FINE)), events=events)
    assert tree.merge_share == 1.0
    assert level_agreement(tree.members[:, 0], fine % GROUPS)["ari"] == 1.0


def test_the_merge_follows_content_where_each_user_engages_with_one_fine_interest() -> None:
    """Co-engagement cannot tell which fine interests belong together when no user engages with
    two of them before the cut; the planted content can."""
    x, truth = planted_vectors(branching=(GROUPS, FINE // GROUPS), per_leaf=PER_FINE)
    coarse, fine = truth[:, 0], truth[:, 1]
    group_of = torch.zeros(FINE, dtype=torch.long).scatter_(0, fine, coarse)
    events = _world(fine, group_of, earlier_interests=1)
    share, recall = _choice(x, events)
    assert share < 1.0 and recall[share] > recall[1.0] + 0.3, recall
    tree = build_hierarchy(x, HierarchyConfig(sizes=(GROUPS, FINE)), events=events)
    assert tree.merge_share == share
    assert level_agreement(tree.members[:, 0], coarse)["ari"] == 1.0


def test_where_the_events_cannot_tell_the_merges_apart_content_merges() -> None:
    """Users who engage with fine interests at random, before and after the cut: no merge
    retrieves the later events better, so the coarse levels follow what the items are, which
    a retrain does not change."""
    x, truth = planted_vectors(branching=(GROUPS, FINE // GROUPS), per_leaf=PER_FINE)
    generator = torch.Generator().manual_seed(1)
    rows = [
        (user, int(item), 0, time)
        for user in range(120)
        for time in (0, 0, 0, 100)
        for item in torch.randint(len(x), (1,), generator=generator)
    ]
    events = FunnelEvents(*(torch.tensor(column) for column in zip(*rows, strict=True)))
    assert _choice(x, events)[0] == 0.0
    tree = build_hierarchy(x, HierarchyConfig(sizes=(GROUPS, FINE)), events=events)
    assert tree.merge_share == 0.0
    assert level_agreement(tree.members[:, 0], truth[:, 0])["ari"] == 1.0


def test_without_held_out_events_the_first_share_merges() -> None:
    x, _ = planted_vectors(branching=(GROUPS, FINE // GROUPS), per_leaf=PER_FINE)
    same_time = FunnelEvents(*(torch.zeros(4, dtype=torch.long) for _ in range(4)))
    assert _choice(x, same_time) == (SHARES[0], {})
    tree = build_hierarchy(x, HierarchyConfig(sizes=(GROUPS, FINE), merge_shares=(0.5,)))
    assert tree.merge_share == 0.5


def test_the_sparse_profiles_cosines_are_the_dense_profiles_cosines() -> None:
    """`similarity` never forms the tokens x users profiles; its cosines are theirs: the
    square-rooted counts row-normalised, centred on the mean row, normalised again, weighted
    against the content's cosines; and Ward's linkage of them groups as of the dense rows."""
    x, truth = planted_vectors(branching=(FINE,), per_leaf=PER_FINE)
    fine = truth[:, 0]
    events = _world(fine, torch.arange(FINE) % GROUPS, earlier_interests=2)
    counts = torch.zeros(FINE, int(events.users.max()) + 1, dtype=torch.float64)
    counts.index_put_(
        (fine[events.items], events.users), torch.ones(len(events), dtype=torch.float64), True
    )
    engaged = F.normalize(counts.sqrt(), dim=1)
    engaged = F.normalize(engaged - engaged.mean(dim=0), dim=1)
    content = F.normalize(torch.zeros(FINE, x.shape[1]).index_add_(0, fine, x), dim=1).double()
    for share in (0.0, 0.5, 1.0):
        dense = torch.cat([engaged * share**0.5, content * (1 - share) ** 0.5], dim=1)
        cosine = similarity(x, fine, events, share)
        torch.testing.assert_close(cosine, dense @ dense.T, atol=1e-6, rtol=1e-5)  # float32 sums
        of_rows = fcluster(linkage(dense.numpy(), method="ward"), GROUPS, criterion="maxclust")
        assert torch.equal(ward_groups(cosine, GROUPS), torch.as_tensor(of_rows - 1))
    # summed over blocks of 7 users, as over one block
    in_blocks = _centred_cosine(fine[events.items], events.users, FINE, block=7 * FINE)
    torch.testing.assert_close(in_blocks, engaged @ engaged.T, atol=1e-6, rtol=1e-5)


def test_the_condensed_distances_are_the_distance_matrixs_to_the_last_bit() -> None:
    """Written row by row and converted in place, they are scipy's condensed form of the whole
    matrix sqrt(2 - 2 cos), bit for bit: the same linkage, the same tree."""
    x = F.normalize(torch.randn(300, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    cosine = (x @ x.T).double()
    matrix = (2 - 2 * cosine).clamp_min(0).sqrt().fill_diagonal_(0).numpy()
    condensed = condensed_distances(cosine)
    assert condensed.tobytes() == squareform(matrix, checks=False).tobytes()
    assert torch.equal(cosine, (x @ x.T).double())  # the cosines are left as they were
