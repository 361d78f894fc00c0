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


@dataclass(frozen=True)
class Inverse:
    """P = (X^T X + lambda I)^-1 = R^T R with R = L^-1, L its Cholesky factor; kept as R and
    diag(P), since x P = (x R^T) R and B = I - P diag(1 / diag(P)) need nothing else.
    Shapes: root [M, M] float32 (lower triangular), diagonal [M] float32."""

    root: Tensor
    diagonal: Tensor


class EASE:
    """score(u) = x_u B + repeat_weight x_u with B = I - P diag(1 / diag(P)),
    P = (X^T X + lambda I)^-1 (so diag B = 0), X = the positive part of `confidence()` restricted
    to the `max_items` items with the most users; x_u the user's row of `confidence()` (negative
    where "not interested" outweighs).

    P is never formed: a Cholesky factor and one triangular solve give R = L^-1 (P = R^T R, diag P
    = column sums of R squared), a third of the flops of forming the inverse and, measured on
    2 cores at M = 6k, 4.6x less time than `torch.cholesky_inverse` (20 s against 94). Matrices
    are dense M x M, float64 while solving (0.8 GB each at M = 10k, about three alive at the
    peak), so the default M = 10k fits 24 GB of RAM next to everything else. Items
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
        self.inverse = Inverse(torch.zeros(0, 0), torch.zeros(0))

    def fit(self, history: Interactions) -> None:
        self.pairs = pairs = history.confidence()
        gram = self.memo.get("ease_gram", (history, self.max_items), lambda: self._gram(pairs))
        self.columns = gram.columns
        self.inverse = self.memo.get(
            "ease_inverse", (history, self.max_items, self.l2), lambda: self._inverse(gram)
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

    def _inverse(self, gram: Gram) -> Inverse:
        regularised = gram.gram.clone()
        regularised.diagonal().add_(self.l2)
        factor = torch.linalg.cholesky(regularised)
        del regularised
        identity = torch.eye(len(factor), dtype=factor.dtype)
        root = torch.linalg.solve_triangular(factor, identity, upper=False)
        return Inverse(root.float(), root.square().sum(0).float())

    def score(self, users: Tensor) -> Tensor:
        assert self.pairs is not None, "fit first"
        own = self.pairs.dense(users)
        scores = torch.full_like(own, UNSCORED)
        if self.repeat_weight:
            scores = torch.where(own != 0, self.repeat_weight * own, scores)
        x = own[:, self.columns]
        # x B = x - (x P) / diag(P), with x P = (x R^T) R; the diagonal of B is 0 by construction
        times_p = (x @ self.inverse.root.T) @ self.inverse.root
        scores[:, self.columns] = x - times_p / self.inverse.diagonal
        if self.repeat_weight:
            scores[:, self.columns] += self.repeat_weight * own[:, self.columns]
        return scores
