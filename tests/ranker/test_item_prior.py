"""Item priors: the content-predicted popularity leaves the item's own events out, and scores
every user alike."""

from __future__ import annotations

import torch

from hier_pipeline.ranker.item_prior import ItemPrior, neighbours_mean


def test_an_items_prior_is_its_neighbours_weighted_popularity_without_its_own() -> None:
    # item 0's neighbours: itself (1.0), item 1 (0.5), item 2 (0.25); item 1's: itself and item 0;
    # item 2's: itself only; item 3 has no content, so no neighbour at all
    rows = torch.tensor([0, 0, 0, 1, 1, 2])
    columns = torch.tensor([0, 1, 2, 0, 1, 2])
    weights = torch.tensor([1.0, 0.5, 0.25, 0.5, 1.0, 1.0])
    similarity = torch.sparse_coo_tensor(torch.stack([rows, columns]), weights, (4, 4))
    popularity = torch.tensor([10.0, 2.0, 4.0, 7.0])
    prior = neighbours_mean(similarity.to_sparse_csr(), popularity)
    expected = torch.tensor([(0.5 * 2.0 + 0.25 * 4.0) / 0.75, 10.0, 0.0, 0.0])
    assert torch.allclose(prior, expected)


def test_a_prior_scores_every_user_alike() -> None:
    prior = ItemPrior(torch.tensor([0.3, 0.1, 0.2]))
    scores = prior(torch.tensor([4, 0]))
    assert scores.shape == (2, 3)
    assert torch.equal(scores[0], scores[1]) and torch.equal(scores[0], prior.values)
