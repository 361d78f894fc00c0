"""ItemKNN (Sarwar et al. 2001; Deshpande & Karypis 2004): items like the ones the user engaged with,
"like" meaning cosine similarity of their columns in the user x item confidence matrix."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions, PairMatrix, sparse


class ItemKNN:
    """score(u, i) = sum_j x_uj S_ji, with S_ji = cos(x_:j, x_:i) kept for the `neighbours` most
    similar items i of each item j (0 elsewhere and on the diagonal); x = `confidence()`.

    Similarities are computed `chunk` items at a time, as a sparse product (only pairs of items
    that share a user cost anything) written into a chunk x items block for the top-N, so 92k
    items never need an items x items matrix.
    """

    def __init__(self, neighbours: int = 50, chunk: int = 1024) -> None:
        self.neighbours = neighbours
        self.chunk = chunk
        self.pairs: PairMatrix | None = None
        self.similarity_t = torch.zeros(0, 0).to_sparse()  # S^T, sparse [items, items]

    def fit(self, history: Interactions) -> None:
        self.pairs = pairs = history.confidence()
        num_users, num_items = pairs.num_users, pairs.num_items
        norm = torch.zeros(num_items).index_add_(0, pairs.item, pairs.value.square()).sqrt()
        by_item = sparse(
            pairs.item, pairs.user, pairs.value / norm[pairs.item], (num_items, num_users)
        )  # sorted by item, then user
        entry_item, entry_user = by_item.indices()
        active = (norm > 0).nonzero().flatten()
        none = torch.zeros(0, dtype=torch.long)
        rows, cols, sims = [none], [none], [torch.zeros(0)]
        for start in range(0, len(active), self.chunk):
            items = active[start : start + self.chunk]
            lo, hi = torch.searchsorted(entry_item, torch.stack([items[0], items[-1] + 1])).tolist()
            block = sparse(
                entry_user[lo:hi],
                torch.searchsorted(items, entry_item[lo:hi]),
                by_item.values()[lo:hi],
                (num_users, len(items)),
            )
            with warnings.catch_warnings():  # sparse x sparse goes through beta CSR internally
                warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
                product = torch.sparse.mm(by_item, block).coalesce()  # co-occurring pairs only
            other, mine = product.indices()
            similarity = torch.zeros(len(items), num_items)
            similarity[mine, other] = product.values()
            similarity[torch.arange(len(items)), items] = 0.0
            top = similarity.topk(min(self.neighbours, num_items), dim=1)
            keep = top.values > 0
            rows.append(items.unsqueeze(1).expand_as(keep)[keep])
            cols.append(top.indices[keep])
            sims.append(top.values[keep])
        self.similarity_t = sparse(
            torch.cat(cols), torch.cat(rows), torch.cat(sims), (num_items, num_items)
        )

    def score(self, users: Tensor) -> Tensor:
        assert self.pairs is not None, "fit first"
        return torch.sparse.mm(self.similarity_t, self.pairs.dense(users).T).T
