"""EASE (Steck, "Embarrassingly Shallow Autoencoders for Sparse Data", WWW 2019): a closed-form
item-item linear model, often the strongest non-neural collaborative baseline; with a buy-again
term, since its zero diagonal forbids an item to predict itself, the strongest grocery signal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions, PairMatrix
from hier_pipeline.evaluation.baselines.recommender import UNSCORED, Memo


class Inverse(Protocol):
    """P = (X^T X + lambda I)^-1 in a factored form: what scoring needs of it, x P and diag(P).
    Shapes: diagonal [M] float32."""

    @property
    def diagonal(self) -> Tensor: ...

    def times(self, x: Tensor) -> Tensor:
        """x P. Shapes: x [U, M] float32 -> [U, M] float32."""
        ...


@dataclass(frozen=True)
class CholeskyInverse:
    """P = R^T R with R = L^-1, L the Cholesky factor of X^T X + lambda I: a factor and one
    triangular solve, a third of the flops of forming P and, measured on 2 cores at M = 6k, 4.6x
    less time than `torch.cholesky_inverse` (20 s against 94). Shapes: root [M, M] float32."""

    root: Tensor
    diagonal: Tensor

    @classmethod
    def of(cls, gram: Tensor, l2: float) -> CholeskyInverse:
        """Shapes: gram [M, M] float64 (X^T X)."""
        regularised = gram.clone()
        regularised.diagonal().add_(l2)
        factor = torch.linalg.cholesky(regularised)
        del regularised
        identity = torch.eye(len(factor), dtype=factor.dtype)
        root = torch.linalg.solve_triangular(factor, identity, upper=False)
        return cls(root.float(), root.square().sum(0).float())

    def times(self, x: Tensor) -> Tensor:
        return (x @ self.root.T) @ self.root


@dataclass(frozen=True)
class WoodburyInverse:
    """P = (I - Y^T diag(1 / (s + lambda)) Y) / lambda, where X X^T = W diag(s) W^T and Y = W^T X
    (Woodbury's identity: (X^T X + lambda I)^-1 = (I - X^T (X X^T + lambda I)^-1 X) / lambda).
    With fewer users than items (Complete Journey: 2.5k households, 10k items) one users x users
    eigendecomposition serves every lambda, at a small share of one M x M Cholesky. float64
    throughout: diag(P) is 1 minus a number close to 1 for a much-bought item at small lambda.
    Shapes: basis Y [K, M] float64, weight 1 / (s + lambda) [K] float64."""

    l2: float
    basis: Tensor
    weight: Tensor
    diagonal: Tensor

    @classmethod
    def of(cls, eigenvalues: Tensor, basis: Tensor, l2: float) -> WoodburyInverse:
        """Shapes: eigenvalues s [K] float64, basis Y [K, M] float64."""
        weight = 1.0 / (eigenvalues.clamp(min=0.0) + l2)
        diagonal = (1.0 - weight @ basis.square()) / l2
        return cls(l2, basis, weight, diagonal.float())

    def times(self, x: Tensor) -> Tensor:
        wide = x.double()
        return ((wide - ((wide @ self.basis.T) * self.weight) @ self.basis) / self.l2).float()


@dataclass(frozen=True)
class Factors:
    """What every lambda's P is made from, for the item subset `columns` (M items): `inverse`
    maps lambda to P. Made from X^T X where the history has at least as many users as items,
    else from the eigendecomposition of X X^T (`WoodburyInverse`)."""

    columns: Tensor
    inverse: Callable[[float], Inverse]

    @classmethod
    def of(cls, columns: Tensor, x: Tensor) -> Factors:
        """Shapes: x [K, M] float64, the subset's rows of the K users with an entry in it."""
        if len(x) >= x.shape[1]:
            return cls(columns, partial(CholeskyInverse.of, x.T @ x))
        eigenvalues, vectors = torch.linalg.eigh(x @ x.T)
        return cls(columns, partial(WoodburyInverse.of, eigenvalues, vectors.T @ x))


class EASE:
    """score(u) = x_u B + repeat_weight x_u with B = I - P diag(1 / diag(P)),
    P = (X^T X + lambda I)^-1 (so diag B = 0), X = the positive part of `confidence()` restricted
    to the `max_items` items with the most users; x_u the user's row of `confidence()` (negative
    where "not interested" outweighs).

    P is never formed (`Inverse`): with at least as many users as items, a Cholesky factor per
    lambda (`CholeskyInverse`), dense M x M, float64 while solving (0.8 GB each at M = 10k,
    about three alive at the peak, so the default M = 10k fits 24 GB of RAM next to everything
    else); with fewer users, one users x users eigendecomposition for every lambda
    (`WoodburyInverse`). Items outside the subset (rare ones, and cold items, which have no users)
    score UNSCORED, or their buy-again term where the user has one. The factors depend on the
    history alone and P on lambda too, so a grid's settings share them through `memo`.
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
        self.inverse: Inverse = CholeskyInverse(torch.zeros(0, 0), torch.zeros(0))

    def fit(self, history: Interactions) -> None:
        self.pairs = pairs = history.confidence()
        factors = self.memo.get(
            "ease_factors", (history, self.max_items), lambda: self._factors(pairs)
        )
        self.columns = factors.columns
        self.inverse = self.memo.get(
            "ease_inverse", (history, self.max_items, self.l2), lambda: factors.inverse(self.l2)
        )

    def _factors(self, pairs: PairMatrix) -> Factors:
        positive = pairs.value > 0
        users_per_item = torch.bincount(pairs.item[positive], minlength=pairs.num_items)
        ranked = torch.sort(users_per_item, descending=True, stable=True)
        columns = ranked.indices[: self.max_items][ranked.values[: self.max_items] > 0]
        position = torch.full((pairs.num_items,), -1, dtype=torch.long)
        position[columns] = torch.arange(len(columns))
        kept = (position[pairs.item] >= 0) & positive
        users, row = torch.unique(pairs.user[kept], return_inverse=True)
        x = torch.zeros(len(users), len(columns), dtype=torch.float64)
        x[row, position[pairs.item[kept]]] = pairs.value[kept].double()
        return Factors.of(columns, x)

    def score(self, users: Tensor) -> Tensor:
        assert self.pairs is not None, "fit first"
        own = self.pairs.dense(users)
        scores = torch.full_like(own, UNSCORED)
        if self.repeat_weight:
            scores = torch.where(own != 0, self.repeat_weight * own, scores)
        x = own[:, self.columns]
        # x B = x - (x P) / diag(P); the diagonal of B is 0 by construction
        scores[:, self.columns] = x - self.inverse.times(x) / self.inverse.diagonal
        if self.repeat_weight:
            scores[:, self.columns] += self.repeat_weight * own[:, self.columns]
        return scores
