"""EASE (Steck, "Embarrassingly Shallow Autoencoders for Sparse Data", WWW 2019): a closed-form
item-item linear model, often the strongest non-neural collaborative baseline."""

from __future__ import annotations

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions, PairMatrix
from hier_pipeline.evaluation.baselines.recommender import UNSCORED


class EASE:
    """score(u) = x_u B with B = I - P diag(1 / diag(P)), P = (X^T X + lambda I)^-1 (so diag B = 0),
    X = `confidence()` restricted to the `max_items` items with the most users.

    The inverse is dense M x M in float64: 0.8 GB per matrix at M = 10k, about three alive at the
    peak, and O(M^3) time, so the default M = 10k fits 24 GB of RAM next to everything else. Items
    outside the subset (rare ones, and cold items, which have no users) score UNSCORED.
    """

    def __init__(self, l2: float = 100.0, max_items: int = 10_000) -> None:
        self.l2 = l2
        self.max_items = max_items
        self.pairs: PairMatrix | None = None
        self.columns = torch.zeros(0, dtype=torch.long)
        self.weights = torch.zeros(0, 0)

    def fit(self, history: Interactions) -> None:
        self.pairs = pairs = history.confidence()
        users_per_item = torch.bincount(pairs.item, minlength=pairs.num_items)
        ranked = torch.sort(users_per_item, descending=True, stable=True)
        self.columns = ranked.indices[: self.max_items][ranked.values[: self.max_items] > 0]
        position = torch.full((pairs.num_items,), -1, dtype=torch.long)
        position[self.columns] = torch.arange(len(self.columns))
        kept = position[pairs.item] >= 0
        x = torch.zeros(pairs.num_users, len(self.columns))
        x[pairs.user[kept], position[pairs.item[kept]]] = pairs.value[kept]
        gram = (x.T @ x).double()
        gram.diagonal().add_(self.l2)
        inverse = torch.cholesky_inverse(torch.linalg.cholesky(gram))
        weights = inverse / -inverse.diagonal()
        weights.diagonal().zero_()
        self.weights = weights.float()

    def score(self, users: Tensor) -> Tensor:
        assert self.pairs is not None, "fit first"
        scores = torch.full((len(users), self.pairs.num_items), UNSCORED)
        scores[:, self.columns] = self.pairs.dense(users)[:, self.columns] @ self.weights
        return scores
