"""Bag-of-Meaning tokens: each entity's top-k primitives per level, with weights.

The bag descends the tree: level 0 may pick any primitive, level l only children of the bag's
level-(l-1) tokens, so every token's parent is in the bag too (a bag reads as a few paths, not a
scatter of unrelated fine interests). The entity's greedy path (`InterestHierarchy.path`) is always
in the bag; for an item of the tree it is its code. Weights are a softmax of cosine / temperature over the
bag, per level.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class TokenBags:
    """Shapes: path [N, L]; tokens [N, L, k] best first, NO_TOKEN where a level has fewer than k
    candidates; weights [N, L, k], summing to 1 per level, 0 at NO_TOKEN."""

    path: Tensor
    tokens: Tensor
    weights: Tensor

    def __len__(self) -> int:
        return len(self.path)

    def missing_levels(self) -> int:
        """Entities without a token at some level (0 for bags from `assign_tokens`)."""
        return int((self.tokens[:, :, 0] < 0).any(dim=1).sum())


def assign_tokens(
    vectors: Tensor,
    hierarchy: InterestHierarchy,
    config: TokenConfig = TokenConfig(),
    path: Tensor | None = None,
) -> TokenBags:
    """The bag of every row of `vectors` (unit norm, in the hierarchy's space). `path`: the rows'
    own primitives where they have them (the tree's items: their codes, `hierarchy.members`);
    else their greedy descent. Shapes: vectors [N, d], path [N, L]."""
    if path is None:
        path = hierarchy.path(vectors)
    tokens, weights = [], []
    for start in range(0, len(vectors), CHUNK):
        chunk_tokens, chunk_weights = _bags(
            vectors[start : start + CHUNK], path[start : start + CHUNK], hierarchy, config
        )
        tokens.append(chunk_tokens)
        weights.append(chunk_weights)
    if not tokens:
        empty = torch.zeros(0, hierarchy.levels, config.top_k)
        return TokenBags(path, empty.long(), empty)
    return TokenBags(path, torch.cat(tokens), torch.cat(weights))


def _bags(
    vectors: Tensor, path: Tensor, hierarchy: InterestHierarchy, config: TokenConfig
) -> tuple[Tensor, Tensor]:
    tokens: list[Tensor] = []
    weights: list[Tensor] = []
    k = config.top_k
    for level in range(hierarchy.levels):
        span = hierarchy.level(level)
        scores = vectors @ hierarchy.centroids[span].T
        if level:
            in_bag = torch.zeros(len(vectors), len(hierarchy.parent) + 1, dtype=torch.bool)
            in_bag.scatter_(1, tokens[-1].where(tokens[-1] >= 0, len(hierarchy.parent)), True)
            scores = scores.masked_fill(~in_bag[:, hierarchy.parent[span]], -torch.inf)
        width = min(k, scores.shape[1])
        values, local = scores.topk(width, dim=1)
        on_path = path[:, level] - span.start
        missing = ~(local == on_path[:, None]).any(dim=1)  # the path may lose to cousins: keep it
        local[missing, -1] = on_path[missing]
        values[missing, -1] = scores[missing, on_path[missing]]
        valid = values > -torch.inf
        level_weights = torch.softmax(values / config.temperature, dim=1)  # 0 where -inf
        level_tokens = torch.where(valid, local + span.start, NO_TOKEN)
        pad = (0, k - width)
        tokens.append(torch.nn.functional.pad(level_tokens, pad, value=NO_TOKEN))
        weights.append(torch.nn.functional.pad(level_weights, pad))
    return torch.stack(tokens, dim=1), torch.stack(weights, dim=1)


class InvertedIndex:
    """token -> the targets whose bags hold it, with their weights (postings in CSR form: token t's
    targets are targets[rowptr[t]:rowptr[t + 1]]).

    A query bag scores each target by the sum over the tokens both hold of
    LEVEL_WEIGHT**level x query weight x target weight: sharing a fine interest says more than
    sharing a coarse one. Only the postings of the query's few tokens are touched.
    """

    def __init__(self, bags: TokenBags, num_tokens: int) -> None:
        n, levels, k = bags.tokens.shape
        valid = bags.tokens >= 0
        token = bags.tokens[valid]
        order = torch.argsort(token, stable=True)
        self.rowptr = torch.zeros(num_tokens + 1, dtype=torch.long)
        torch.cumsum(torch.bincount(token, minlength=num_tokens), dim=0, out=self.rowptr[1:])
        self.targets = torch.arange(n)[:, None, None].expand(n, levels, k)[valid][order]
        self.weights = bags.weights[valid][order]
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
