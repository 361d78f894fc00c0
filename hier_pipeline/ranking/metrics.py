"""Ranking metrics over full item rankings, with RelBench's link-prediction definitions.

For a user with relevant set R (|R| > 0) and top-k list i_1..i_k, rel_j = [i_j in R]::

    recall@k    = sum_j rel_j / |R|                       (not clipped to k, as RelBench)
    hit@k       = [sum_j rel_j > 0]
    map@k       = sum_j rel_j * precision@j / min(k, |R|),   precision@j = sum_{l<=j} rel_l / j
    ndcg@k      = sum_j rel_j / log2(j + 1)  /  sum_{j <= min(k, |R|)} 1 / log2(j + 1)

Each metric is the mean over users with |R| > 0; users with nothing relevant are skipped.
(hit@k is not in RelBench; the others match `relbench/metrics.py`'s `link_prediction_*`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class UserItems:
    """A set of items per user in CSR form: user u's items are items[rowptr[u]:rowptr[u + 1]],
    sorted and unique within each row.

    Shapes: rowptr [U + 1] long, items [nnz] long.
    """

    rowptr: Tensor
    items: Tensor
    num_items: int

    @classmethod
    def from_pairs(cls, users: Tensor, items: Tensor, num_users: int, num_items: int) -> UserItems:
        """From (user, item) pairs in any order, duplicates allowed. Shapes: users, items [E]."""
        keys = torch.unique(users.long() * num_items + items.long())  # sorted: by user, then item
        counts = torch.bincount(keys // num_items, minlength=num_users)
        rowptr = torch.zeros(num_users + 1, dtype=torch.long)
        torch.cumsum(counts, dim=0, out=rowptr[1:])
        return cls(rowptr, keys % num_items, num_items)

    @property
    def num_users(self) -> int:
        return len(self.rowptr) - 1

    def counts(self) -> Tensor:
        """|items of u| for every user. Shapes: [U]."""
        return self.rowptr.diff()

    def rows(self, start: int, end: int) -> tuple[Tensor, Tensor]:
        """(row within [start, end), item) of every pair of users start..end-1. Shapes: [E'] each."""
        counts = self.counts()[start:end]
        row = torch.repeat_interleave(torch.arange(end - start), counts)
        return row, self.items[self.rowptr[start] : self.rowptr[end]]

    def contains(self, candidates: Tensor) -> Tensor:
        """[candidates[u, j] in items of u], by binary search. Shapes: [U, k] long -> [U, k] bool.

        Negative candidates (no item) are never contained.
        """
        user = torch.arange(len(candidates), device=candidates.device).unsqueeze(1)
        return self.has(user.expand_as(candidates), candidates) & (candidates >= 0)

    def has(self, users: Tensor, items: Tensor) -> Tensor:
        """[items[j] in items of users[j]], by binary search. Shapes: any, equal -> same, bool."""
        keys = self.keys().to(items.device)
        if len(keys) == 0:
            return torch.zeros_like(items, dtype=torch.bool)
        query = users * self.num_items + items
        return keys[torch.searchsorted(keys, query).clamp_max(len(keys) - 1)] == query

    def keys(self) -> Tensor:
        """user * num_items + item for every pair, ascending. Shapes: [nnz]."""
        users = torch.repeat_interleave(torch.arange(self.num_users), self.counts())
        return users * self.num_items + self.items


@dataclass(frozen=True)
class PairScores:
    """Sparse additions to a dense score matrix, e.g. a model's personal-history term.

    Shapes: rows, items, values: [P], `rows` indexing the ranked users, ascending."""

    rows: Tensor
    items: Tensor
    values: Tensor

    def add_to(self, scores: Tensor, start: int, end: int) -> None:
        """Add the pairs of users [start, end) to `scores` ([end - start, I]) in place."""
        lower, upper = torch.searchsorted(self.rows, torch.tensor([start, end])).tolist()
        scores[self.rows[lower:upper] - start, self.items[lower:upper]] += self.values[lower:upper]


def topk_in_chunks(
    user_emb: Tensor,
    item_emb: Tensor,
    k: int,
    exclude: UserItems | None = None,
    chunk: int = 1024,
    pair_scores: PairScores | None = None,
) -> Tensor:
    """The k best items per user by inner product (plus `pair_scores`), `chunk` users at a time.

    Excluded items (e.g. each user's training items) are never returned; where fewer than k items
    remain, the tail is -1. Peak memory is chunk x I scores, never U x I.

    Shapes: user_emb [U, d], item_emb [I, d] -> [U, k] long, best first.
    """
    if k > len(item_emb):
        raise ValueError(f"k={k} exceeds the {len(item_emb)} items")
    parts = []
    for start in range(0, len(user_emb), chunk):
        end = min(start + chunk, len(user_emb))
        scores = user_emb[start:end] @ item_emb.T
        if pair_scores is not None:
            pair_scores.add_to(scores, start, end)
        if exclude is not None:
            row, item = exclude.rows(start, end)
            scores[row.to(scores.device), item.to(scores.device)] = -torch.inf
        values, indices = scores.topk(k, dim=1)
        parts.append(indices.masked_fill(values == -torch.inf, -1))
    if not parts:
        return torch.empty(0, k, dtype=torch.long)
    return torch.cat(parts)


def ranking_metrics(
    topk: Tensor, relevant: UserItems, ks: Sequence[int] = (10,)
) -> dict[str, float]:
    """recall/ndcg/map/hit@k for every k in `ks` (each <= topk's width), as in the module doc.

    Shapes: topk [U, K] long (row u ranks user u's items, best first; -1 = none).
    Output: {"recall@10": ..., "ndcg@10": ..., "map@10": ..., "hit@10": ...}; NaN without users.
    """
    return {
        name: values.mean().item() for name, values in per_user_metrics(topk, relevant, ks).items()
    }


def per_user_metrics(
    topk: Tensor, relevant: UserItems, ks: Sequence[int] = (10,)
) -> dict[str, Tensor]:
    """`ranking_metrics` before the mean: one value per user with something relevant, in user
    order (what a paired bootstrap resamples). Shapes: -> [U'] float32 each, U' = users with
    |R| > 0."""
    if len(topk) != relevant.num_users:
        raise ValueError(f"{len(topk)} ranked users but {relevant.num_users} in the truth")
    count = relevant.counts()
    keep = count > 0
    isin = relevant.contains(topk.cpu())[keep].float()
    count = count[keep].float()
    position = torch.arange(1, topk.size(1) + 1, dtype=torch.float32)
    discount = 1.0 / torch.log2(position + 1.0)
    ideal = torch.cat([torch.zeros(1), discount.cumsum(0)])  # ideal[n]: DCG of n hits on top
    results: dict[str, Tensor] = {}
    for k in ks:
        if not 0 < k <= topk.size(1):
            raise ValueError(f"k={k} is outside 1..{topk.size(1)}")
        hits = isin[:, :k]
        found = hits.sum(dim=1)
        clipped = count.clamp(max=k)
        precision_at = hits.cumsum(dim=1) / position[:k]
        results[f"recall@{k}"] = found / count
        results[f"ndcg@{k}"] = (hits * discount[:k]).sum(dim=1) / ideal[clipped.long()]
        results[f"map@{k}"] = (precision_at * hits).sum(dim=1) / clipped
        results[f"hit@{k}"] = (found > 0).float()
    return results


def evaluate_embeddings(
    user_emb: Tensor,
    item_emb: Tensor,
    relevant: UserItems,
    ks: Sequence[int] = (10,),
    exclude: UserItems | None = None,
    chunk: int = 1024,
    pair_scores: PairScores | None = None,
) -> dict[str, float]:
    """`ranking_metrics` of the full inner-product ranking, computed in user chunks.

    Shapes: user_emb [U, d], item_emb [I, d]; relevant and exclude over the same U users.
    """
    return ranking_metrics(
        topk_in_chunks(user_emb, item_emb, max(ks), exclude, chunk, pair_scores), relevant, ks
    )
