"""The tree of semantic IDs: fused vectors, capacity limits, coarse levels from co-engagement,
refitting from a serving tree, and bags from events; on tiny planted tensors and on the tiny
synthetic world with its briefly trained model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from hier_pipeline.interests import (
    HierarchyConfig,
    TokenConfig,
    assign_tokens,
    build_hierarchy,
    find_interest_folder,
)
from hier_pipeline.interests.artifact import TOKENS_FILE, load_hierarchy, load_tokens
from hier_pipeline.interests.engaged import engaged_tokens, event_weights
from hier_pipeline.interests.events import FunnelEvents, funnel_events
from hier_pipeline.interests.fusion import ItemFusion
from hier_pipeline.interests.kmeans import (
    KMeansConfig,
    capped_argmax,
    spherical_kmeans,
    streamed_capped_argmax,
)
from hier_pipeline.interests.matching import (
    load_serving_tree,
    serving_members,
    stable_token_ids,
)
from hier_pipeline.interests.quality import level_agreement
from hier_pipeline.interests.tokens import NO_TOKEN, code_bags
from tests.interests.conftest import InterestInputs, Materialised
from tests.interests.planted import planted_vectors

DAY = 86_400
LEVELS = ("coarse_id", "mid_id", "fine_id")


def _events(pairs: list[tuple[int, int]], stage: int = 0, time: int = 0) -> FunnelEvents:
    users, items = (torch.tensor(column) for column in zip(*pairs, strict=True))
    return FunnelEvents(users, items, torch.full_like(users, stage), torch.full_like(users, time))


def test_fused_cosine_is_the_weighted_mean_of_content_and_behaviour_cosines() -> None:
    generator = torch.Generator().manual_seed(0)
    behaviour = F.normalize(torch.randn(6, 8, generator=generator), dim=1)
    text = F.normalize(torch.randn(6, 5, generator=generator), dim=1)
    content = {"text": text, "has_text": torch.tensor([1, 1, 1, 1, 1, 0]).bool()}
    fusion = ItemFusion.of(content, 0.8)
    fused = fusion(behaviour, content)
    centred = fusion.content_vectors(content, 6)
    expected = 0.8 * centred[:5] @ centred[:5].T + 0.2 * behaviour[:5] @ behaviour[:5].T
    assert torch.allclose(fused[:5] @ fused[:5].T, expected, atol=1e-5)
    # The item without content is placed by its behaviour alone.
    assert torch.allclose(fused[5, 5:], behaviour[5], atol=1e-6)
    assert torch.allclose(ItemFusion.of(None, 0.8)(behaviour, None), behaviour)


def test_no_cluster_holds_more_than_its_capacity_and_points_keep_their_best_cluster_with_room() -> (
    None
):
    similarity = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.7, 0.6], [0.95, 0.0]])
    labels = capped_argmax(similarity, cap=2)
    assert torch.bincount(labels, minlength=2).max() <= 2
    assert labels.tolist() == [0, 1, 1, 0]  # the two least similar to cluster 0 move on
    x, _ = planted_vectors(branching=(2,), per_leaf=30)
    lopsided = torch.cat([x[:30], x[:6]])  # one cluster holds 36 of 42 points
    clusters = spherical_kmeans(
        lopsided, 3, torch.Generator().manual_seed(0), KMeansConfig(capacity=1.5)
    )
    assert torch.bincount(clusters.labels).max() <= 21  # 1.5 x 42 / 3


def test_the_streamed_capped_assignment_is_the_dense_one_without_its_similarity_matrix() -> None:
    """Points crowded towards a few centroids, so columns overflow and rows move down their own
    order of columns, some past the `width` kept (read again from their whole row), in blocks of
    a few rows: the same labels as `capped_argmax` over the whole matrix."""
    generator = torch.Generator().manual_seed(0)
    centroids = F.normalize(torch.randn(12, 8, generator=generator), dim=1)
    crowd = centroids[:3].repeat_interleave(100, dim=0)
    x = F.normalize(crowd + 0.3 * torch.randn(300, 8, generator=generator), dim=1)
    for cap in (25, 40, 300):
        dense = capped_argmax(x @ centroids.T, cap)
        streamed = streamed_capped_argmax(x, centroids, cap, width=2, block=50)
        assert torch.equal(streamed, dense)
        assert int(torch.bincount(streamed).max()) <= cap
    tight = capped_argmax(x @ centroids.T, 25)
    ranks = (x @ centroids.T).argsort(dim=1, descending=True).argsort(dim=1)
    assert int(ranks.gather(1, tight[:, None]).max()) >= 2  # some rows went past the kept 2


def test_coarse_levels_follow_who_engages_with_the_fine_interests() -> None:
    """Six well separated fine interests whose vectors say nothing about their grouping; users
    engage with {0, 1, 2} or {3, 4, 5}: the coarse level is exactly those two groups."""
    x, truth = planted_vectors(branching=(6,), per_leaf=10)
    fine = truth[:, 0]
    generator = torch.Generator().manual_seed(1)
    pairs = []
    for user in range(40):
        group = [0, 1, 2] if user % 2 else [3, 4, 5]
        items = torch.nonzero(torch.isin(fine, torch.tensor(group))).flatten()
        pairs += [
            (user, int(i)) for i in items[torch.randperm(len(items), generator=generator)[:8]]
        ]
    tree = build_hierarchy(x, HierarchyConfig(sizes=(2, 6)), events=_events(pairs))
    assert not any(tree.violations().values()), tree.violations()
    assert level_agreement(tree.members[:, 1], fine)["ari"] == 1.0
    assert level_agreement(tree.members[:, 0], (fine >= 3).long())["ari"] == 1.0


def test_a_tree_refitted_from_the_serving_one_keeps_its_ids() -> None:
    x, _ = planted_vectors(branching=(3, 2, 2))
    config = HierarchyConfig(sizes=(3, 6, 12))
    old = build_hierarchy(x, config)
    keys = [f"p{i}" for i in range(len(x))]
    # A retrain: every vector moved a little, two new items arrived, one item left.
    moved = F.normalize(
        x + 0.05 * torch.randn(x.shape, generator=torch.Generator().manual_seed(3)), dim=1
    )
    new_x, new_keys = torch.cat([moved[1:], moved[:2]]), [*keys[1:], "new0", "new1"]
    previous = serving_members(old, keys, new_keys)
    assert (previous[-2:] == -1).all() and torch.equal(previous[0], old.members[1])
    refitted = build_hierarchy(new_x, config, previous=previous)
    assert not any(refitted.violations().values()), refitted.violations()
    ids = stable_token_ids(old, keys, refitted, new_keys)
    assert sorted(ids) == sorted(old.token_ids)


def test_a_refit_moves_an_item_only_when_another_code_fits_it_by_more_than_the_margin() -> None:
    """A retrained model's vectors all differ a little: with no margin some items change code,
    with a margin wider than any cosine gain none does, and new items still find a code."""
    x, _ = planted_vectors(branching=(3, 2, 2))
    config = HierarchyConfig(sizes=(3, 6, 12))
    old = build_hierarchy(x, config)
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(5))
    retrained = F.normalize(x + 0.6 * noise, dim=1)
    previous = torch.cat([old.members[:-1], torch.full((1, 3), -1)])  # the last item is new

    keys = [f"p{i}" for i in range(len(x))]
    serving = [[old.token_ids[t] for t in path] for path in old.members[:-1].tolist()]

    def moved(margin: float) -> int:
        """Known items whose token path differs from the serving tree's."""
        tree = build_hierarchy(retrained, replace(config, refit_margin=margin), previous=previous)
        assert not any(tree.violations().values()), tree.violations()
        ids = stable_token_ids(old, keys, tree, keys)
        paths = [[ids[t] for t in path] for path in tree.members[:-1].tolist()]
        return sum(a != b for a, b in zip(paths, serving, strict=True))

    assert moved(margin=0.0) > 0
    assert moved(margin=2.0) == 0


def test_a_users_bag_weighs_deep_and_recent_events_and_falls_back_to_its_embedding() -> None:
    x, _ = planted_vectors(branching=(2, 2), per_leaf=5)
    tree = build_hierarchy(x, HierarchyConfig(sizes=(2, 4)))
    leaf = tree.members[:, 1]
    a, b = (int(torch.nonzero(leaf == t)[0]) for t in leaf.unique()[:2])
    config = TokenConfig(top_k=2)
    now = 100 * DAY
    events = FunnelEvents(  # user 0: views a today, buys b four weeks ago (2 x 1/2 = 1 x 1)
        torch.tensor([0, 0, 1]),
        torch.tensor([a, b, b]),
        torch.tensor([0, 1, 2]),
        torch.tensor([now - 1, now - 28 * DAY - 1, now - 1]),
    )
    weights = event_weights(events, now, config)
    assert torch.allclose(weights, torch.tensor([1.0, 1.0, 4.0], dtype=torch.float64), atol=1e-4)
    users = F.normalize(
        torch.randn(3, x.shape[1], generator=torch.Generator().manual_seed(0)), dim=1
    )
    bags = engaged_tokens(users, events, tree.members, tree, config, now)
    fine = {int(t): float(w) for t, w in zip(bags.tokens[0, 1], bags.weights[0, 1], strict=True)}
    assert fine == {int(tree.members[a, 1]): 0.5, int(tree.members[b, 1]): 0.5}
    assert bags.tokens[1, 1, 0] == tree.members[b, 1] and bags.weights[1, 1, 0] == 1.0
    silent = assign_tokens(users[2:], tree, config)  # user 2 has no event: by embedding
    assert torch.equal(bags.tokens[2], silent.tokens[0])
    assert torch.equal(bags.weights[2], silent.weights[0])


def test_an_items_bag_is_its_code() -> None:
    codes = torch.tensor([[0, 2], [1, 3]])
    bags = code_bags(codes, 3)
    assert torch.equal(bags.tokens[:, :, 0], codes)
    assert (bags.tokens[:, :, 1:] == NO_TOKEN).all()
    assert torch.equal(bags.weights.sum(dim=2), torch.ones(2, 2))


def test_content_and_events_recover_the_planted_world_where_embeddings_alone_do_not(
    interest_inputs: InterestInputs,
) -> None:
    """The briefly trained model's item embeddings alone reach AMI 0.07-0.19 / 0.15-0.22 /
    0.12-0.14 over tree seeds 0-7; fused with the items' content and merged by the world's
    events (co-engagement, as this world's interests were planted), 0.34-0.77 / 0.63-0.79 /
    0.85-0.90. The margin asked is below the smallest seen. (Which merge the held-out events
    choose is `test_merge.py`'s; on this world's 100 users they do not prefer co-engagement.)"""
    truth = interest_inputs.truth
    sizes = tuple(truth[level].nunique() for level in LEVELS)
    items = interest_inputs.embeddings.load()["products"]
    config = HierarchyConfig(sizes=sizes, merge_shares=(1.0,))
    alone = build_hierarchy(items, config)
    fused = build_hierarchy(
        items,
        config,
        interest_inputs.content["products"],
        funnel_events(interest_inputs.graph.load()),
    )
    for level, name in enumerate(LEVELS):
        planted = truth[name].to_numpy()
        better = level_agreement(fused.members[:, level], planted)["ami"]
        worse = level_agreement(alone.members[:, level], planted)["ami"]
        assert better >= worse + 0.15, (name, better, worse)


def test_a_product_that_arrives_later_gets_the_code_it_would_have_grown_with(
    interest_inputs: InterestInputs,
) -> None:
    """Issue 19: an item unknown to the tree gets its semantic ID through the finest codebook,
    from its content and embedding fused as the tree's items were (`item_codes`). Placed that
    way, the tree's own items get their codes back but for the few a code's capacity moved,
    alone as in a batch of all of them (the centring is the catalogue's, not the batch's);
    descending by the embedding alone, as arrivals were placed before, gets far fewer back."""
    truth = interest_inputs.truth
    items = interest_inputs.embeddings.load()["products"]
    content = interest_inputs.content["products"]
    tree = build_hierarchy(
        items,
        HierarchyConfig(sizes=tuple(truth[level].nunique() for level in LEVELS)),
        content,
        funnel_events(interest_inputs.graph.load()),
    )
    codes = tree.item_codes(items, content)
    same = (codes == tree.members).double().mean(dim=0)
    by_embedding = (tree.path(items) == tree.members).double().mean(dim=0)
    assert same.min() >= 0.9
    # measured: 0.99 / 0.97 / 0.97 vs 0.50 / 0.44 / 0.33 (0.36 / 0.26 / 0.19 before the
    # content view was trained to rank, which pulls the embedding towards content too)
    assert (same - by_embedding).min() >= 0.4
    for row in (0, len(items) // 2, len(items) - 1):
        alone = tree.item_codes(
            items[row : row + 1], {k: v[row : row + 1] for k, v in content.items()}
        )
        assert torch.equal(alone[0], codes[row])


def test_a_retrain_starts_from_the_tree_a_folder_serves(
    materialised: Materialised, tmp_path: Path
) -> None:
    folder = find_interest_folder(materialised.home)
    tokens = load_tokens(folder / TOKENS_FILE)
    tree = load_hierarchy(tokens.hierarchy)
    item = tokens.roles["item"]
    keys = tokens.keys[item]
    vectors = tokens.vectors()
    retrained = {t: F.normalize(v + 0.01, dim=1) for t, v in vectors.items()}
    served = load_serving_tree(folder, item, [*reversed(keys), "new"], retrained)
    assert served is not None and served.modalities == tree.modalities
    members = served.members
    assert torch.equal(members[:-1], tree.members.flip(0)) and (members[-1] == -1).all()
    # The same embeddings: no retrain, nothing to refit; nothing served: nothing to start from.
    assert load_serving_tree(folder, item, keys, vectors) is None
    assert load_serving_tree(tmp_path, item, keys, retrained) is None
