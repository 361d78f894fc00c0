"""Bag-of-Meaning tokens: each entity's top-k primitives per level, with weights.

The bag descends the tree: level 0 may pick any primitive, level l only children of the bag's
level-(l-1) tokens, so every token's parent is in the bag too (a bag reads as a few paths, not a
scatter of unrelated fine interests). The entity's greedy path (`InterestHierarchy.path`) is always
in the bag. Weights are a softmax of cosine / temperature over the bag, per level. The tree's own
items are their codes (`code_bags`); users are placed by their events (`engaged.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from hier_pipeline.interests.hierarchy import CHUNK, InterestHierarchy

NO_TOKEN = -1
LEVEL_WEIGHT = 2.0  # a shared level-l token counts LEVEL_WEIGHT**l in token retrieval


@dataclass(frozen=True)
class TokenConfig:
    top_k: int = 3
    temperature: float = 0.1  # the temperature the model's inner-product scores are trained at
    # Bags from events (`engaged.py`): a deeper funnel stage counts `stage_base` times the one
    # above it (as in the super-graph), and an event's weight halves every `half_life_days`.
    stage_base: float = 2.0
    half_life_days: float = 28.0


@dataclass(frozen=True)
class TokenBags:
    """Shapes: path [N, L]; tokens [N, L, k] best first, NO_TOKEN where a level has fewer than k
    candidates; weights [N, L, k], summing to 1 per level, 0 at NO_TOKEN."""

    path: Tensor
    tokens: Tensor
    weights: Tensor

    def __len__(self) -> int:
        return len(self.path)

    def rows(self, index: Tensor) -> TokenBags:
        """The bags of the rows `index` (a mask or row numbers)."""
        return TokenBags(self.path[index], self.tokens[index], self.weights[index])

    def missing_levels(self) -> int:
        """Entities without a token at some level (0 for bags from `assign_tokens`)."""
        return int((self.tokens[:, :, 0] < 0).any(dim=1).sum())


def code_bags(codes: Tensor, top_k: int) -> TokenBags:
    """The bags of the tree's own items: each item is its code, one token per level with weight 1
    (its semantic ID; an item does not half-belong to a neighbouring interest).
    Shapes: codes [N, L] (`InterestHierarchy.members`) -> bags with k = top_k."""
    tokens = torch.full((*codes.shape, top_k), NO_TOKEN, dtype=torch.long)
    weights = torch.zeros(*codes.shape, top_k)
    tokens[:, :, 0], weights[:, :, 0] = codes, 1.0
    return TokenBags(codes.clone(), tokens, weights)


def assign_tokens(
    vectors: Tensor, hierarchy: InterestHierarchy, config: TokenConfig = TokenConfig()
) -> TokenBags:
    """The bag of every row of `vectors` (unit norm, in the hierarchy's space) by its embedding:
    weights a softmax of cosine / temperature. Shapes: vectors [N, d]."""

    def scores(rows: slice, span: slice) -> Tensor:
        return vectors[rows] @ hierarchy.centroids[span].T

    def weigh(values: Tensor) -> Tensor:
        return torch.softmax(values / config.temperature, dim=1)  # 0 where -inf

    return bags_by(scores, weigh, len(vectors), hierarchy, config.top_k)


Scores = Callable[[slice, slice], Tensor]  # (rows, a level's primitives) -> [rows, primitives]


def bags_by(
    scores: Scores,
    weigh: Callable[[Tensor], Tensor],
    count: int,
    hierarchy: InterestHierarchy,
    top_k: int,
) -> TokenBags:
    """Bags of `count` entities from any score of an entity for a primitive (-inf: not a
    candidate), descending the tree as the module docstring says, the path being the greedy
    descent of the scores; `weigh` turns a level's kept scores [rows, k] into weights."""
    paths, tokens, weights = [], [], []
    for start in range(0, count, CHUNK):
        rows = slice(start, min(start + CHUNK, count))
        chunk = _bags(scores, rows, weigh, hierarchy, top_k)
        paths.append(chunk[0])
        tokens.append(chunk[1])
        weights.append(chunk[2])
    if not tokens:
        empty = torch.zeros(0, hierarchy.levels, top_k)
        return TokenBags(empty[:, :, 0].long(), empty.long(), empty)
    return TokenBags(torch.cat(paths), torch.cat(tokens), torch.cat(weights))


def _bags(
    scores_of: Scores,
    rows: slice,
    weigh: Callable[[Tensor], Tensor],
    hierarchy: InterestHierarchy,
    k: int,
) -> tuple[Tensor, Tensor, Tensor]:
    steps: list[Tensor] = []
    tokens: list[Tensor] = []
    weights: list[Tensor] = []
    for level in range(hierarchy.levels):
        span = hierarchy.level(level)
        scores = scores_of(rows, span)
        if level:
            in_bag = torch.zeros(len(scores), len(hierarchy.parent) + 1, dtype=torch.bool)
            in_bag.scatter_(1, tokens[-1].where(tokens[-1] >= 0, len(hierarchy.parent)), True)
            scores = scores.masked_fill(~in_bag[:, hierarchy.parent[span]], -torch.inf)
        if level:  # greedy: the best child of the path's last step
            below = hierarchy.parent[span][None, :] == steps[-1][:, None]
            on_path = scores.masked_fill(~below, -torch.inf).argmax(dim=1)
        else:
            on_path = scores.argmax(dim=1)
        steps.append(on_path + span.start)
        width = min(k, scores.shape[1])
        values, local = scores.topk(width, dim=1)
        missing = ~(local == on_path[:, None]).any(dim=1)  # the path may lose to cousins: keep it
        local[missing, -1] = on_path[missing]
        values[missing, -1] = scores[missing, on_path[missing]]
        valid = values > -torch.inf
        level_tokens = torch.where(valid, local + span.start, NO_TOKEN)
        pad = (0, k - width)
        tokens.append(torch.nn.functional.pad(level_tokens, pad, value=NO_TOKEN))
        weights.append(torch.nn.functional.pad(weigh(values), pad))
    return torch.stack(steps, dim=1), torch.stack(tokens, dim=1), torch.stack(weights, dim=1)


class InvertedIndex:
    """token -> the targets whose bags hold it, with their weights (postings in CSR form: token t's
    targets are targets[rowptr[t]:rowptr[t + 1]]).

    A query bag scores each target by the sum over the tokens both hold of
    LEVEL_WEIGHT**level x query weight x target weight (x the target's `prior` at that level,
    where given: `prior.token_shares`, P(item | token)): sharing a fine interest says more than
    sharing a coarse one. Only the postings of the query's few tokens are touched.
    Shapes: prior [targets, L].
    """

    def __init__(self, bags: TokenBags, num_tokens: int, prior: Tensor | None = None) -> None:
        n, levels, k = bags.tokens.shape
        valid = bags.tokens >= 0
        token = bags.tokens[valid]
        order = torch.argsort(token, stable=True)
        self.rowptr = torch.zeros(num_tokens + 1, dtype=torch.long)
        torch.cumsum(torch.bincount(token, minlength=num_tokens), dim=0, out=self.rowptr[1:])
        self.targets = torch.arange(n)[:, None, None].expand(n, levels, k)[valid][order]
        weights = bags.weights if prior is None else bags.weights * prior[:, :, None]
        self.weights = weights[valid][order]
        self.num_targets = n

    def scores(self, tokens: Tensor, weights: Tensor) -> Tensor:
        """Shapes: one bag's tokens [L, k] and weights [L, k] -> [targets]."""
        scores = torch.zeros(self.num_targets, dtype=self.weights.dtype)
        for level, (level_tokens, level_weights) in enumerate(
            zip(tokens.tolist(), weights.tolist(), strict=True)
        ):
            for token, weight in zip(level_tokens, level_weights, strict=True):
                if token >= 0:
                    start, end = int(self.rowptr[token]), int(self.rowptr[token + 1])
                    scores.index_add_(
                        0,
                        self.targets[start:end],
                        self.weights[start:end] * (weight * LEVEL_WEIGHT**level),
                    )
        return scores
