"""EASE (Steck, "Embarrassingly Shallow Autoencoders for Sparse Data", WWW 2019): a closed-form
item-item linear model, often the strongest non-neural collaborative baseline; with a buy-again
term, since its zero diagonal forbids an item to predict itself, the strongest grocery signal."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions, PairMatrix
from hier_pipeline.evaluation.baselines.recommender import UNSCORED, Memo


@dataclass(frozen=True)
class Gram:
    """X^T X over the item subset, float64. Shapes: columns [M] item ids, gram [M, M]."""

    columns: Tensor
    gram: Tensor


class EASE:
    """score(u) = x_u B + repeat_weight x_u with B = I - P diag(1 / diag(P)),
    P = (X^T X + lambda I)^-1 (so diag B = 0), X = the positive part of `confidence()` restricted
    to the `max_items` items with the most users; x_u the user's row of `confidence()` (negative
    where "not interested" outweighs).

    The inverse is dense M x M in float64: 0.8 GB per matrix at M = 10k, about three alive at the
    peak, and O(M^3) time, so the default M = 10k fits 24 GB of RAM next to everything else. Items
    outside the subset (rare ones, and cold items, which have no users) score UNSCORED, or their
    buy-again term where the user has one. The Gram matrix depends on the history alone and B on
    lambda too, so a grid's settings share them through `memo` (one Cholesky per lambda).
    """

    def __init__(
        self,
        l2: float = 100.0,
        repeat_weight: float = 0.0,
        max_items: int = 10_000,
        memo: Memo | None = None,
    ) -> None:
        self.l2, self.repeat_weight, self.max_items = l2, repeat_weight, max_items
        self.memo = memo or Memo()
        self.pairs: PairMatrix | None = None
        self.columns = torch.zeros(0, dtype=torch.long)
        self.weights = torch.zeros(0, 0)

    def fit(self, history: Interactions) -> None:
        self.pairs = pairs = history.confidence()
        gram = self.memo.get("ease_gram", (history, self.max_items), lambda: self._gram(pairs))
        self.columns = gram.columns
        self.weights = self.memo.get(
            "ease_weights", (history, self.max_items, self.l2), lambda: self._weights(gram)
        )

    def _gram(self, pairs: PairMatrix) -> Gram:
        positive = pairs.value > 0
        users_per_item = torch.bincount(pairs.item[positive], minlength=pairs.num_items)
        ranked = torch.sort(users_per_item, descending=True, stable=True)
        columns = ranked.indices[: self.max_items][ranked.values[: self.max_items] > 0]
        position = torch.full((pairs.num_items,), -1, dtype=torch.long)
        position[columns] = torch.arange(len(columns))
        kept = (position[pairs.item] >= 0) & positive
        x = torch.zeros(pairs.num_users, len(columns))
        x[pairs.user[kept], position[pairs.item[kept]]] = pairs.value[kept]
        return Gram(columns, (x.T @ x).double())

    def _weights(self, gram: Gram) -> Tensor:
        regularised = gram.gram.clone()
        regularised.diagonal().add_(self.l2)
        inverse = torch.cholesky_inverse(torch.linalg.cholesky(regularised))
        weights = inverse / -inverse.diagonal()
        weights.diagonal().zero_()
        return weights.float()

    def score(self, users: Tensor) -> Tensor:
        assert self.pairs is not None, "fit first"
        own = self.pairs.dense(users)
        scores = torch.full_like(own, UNSCORED)
        if self.repeat_weight:
            scores = torch.where(own != 0, self.repeat_weight * own, scores)
        scores[:, self.columns] = own[:, self.columns] @ self.weights
        if self.repeat_weight:
            scores[:, self.columns] += self.repeat_weight * own[:, self.columns]
        return scores
