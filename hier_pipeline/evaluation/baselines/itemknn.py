"""ItemKNN (Sarwar et al. 2001; Deshpande & Karypis 2004): items like the ones the user engaged with,
"like" meaning cosine similarity of their columns in the user x item confidence matrix, shrunk
towards 0 where few users back it (Koren 2008), plus the user's own items (buy again)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import (
    Interactions,
    PairMatrix,
    csr_entries,
    quiet_csr,
    sparse,
    sparse_product,
)
from hier_pipeline.evaluation.baselines.recommender import Memo


@dataclass(frozen=True)
class Neighbours:
    """Each item's most similar items. Entries are ordered by item, then by the other item (the
    order of a CSR matrix, so `matrix` needs no sort); `rank` says how similar each is.
    Shapes: item, other, similarity, rank [N]."""

    item: Tensor
    other: Tensor
    similarity: Tensor
    rank: Tensor  # 0 for an item's most similar other item
    depth: int  # at most this many per item

    @staticmethod
    def from_rows(
        items: Tensor, similarity: Tensor, depth: int, columns: Tensor | None = None
    ) -> Neighbours:
        """The `depth` most similar others of each of `items` (ascending), from their rows of
        `similarity` (positive similarities only), whose columns are the items `columns`
        (ascending; None: all, in order). Shapes: items [C], similarity [C, K], columns [K]."""
        top = similarity.topk(min(depth, similarity.shape[1]), dim=1)
        order = top.indices.sort(dim=1).indices  # by column within each row, as CSR lists them
        indices, values = top.indices.gather(1, order), top.values.gather(1, order)
        keep = values > 0
        others = indices if columns is None else columns[indices]
        return Neighbours(
            items.unsqueeze(1).expand_as(keep)[keep],
            others[keep],
            values[keep],
            order[keep],
            depth,
        )

    @staticmethod
    def concat(parts: list[Neighbours], depth: int) -> Neighbours:
        """The tables of disjoint item chunks, in ascending order, as one."""
        none = torch.zeros(0, dtype=torch.long)
        return Neighbours(
            torch.cat([none, *(part.item for part in parts)]),
            torch.cat([none, *(part.other for part in parts)]),
            torch.cat([torch.zeros(0), *(part.similarity for part in parts)]),
            torch.cat([none, *(part.rank for part in parts)]),
            depth,
        )

    def expand(self, group: Tensor) -> Neighbours:
        """The table of items that share their group's row: item i gets the entries of group
        `group[i]` (this table's `item`s being groups). Shapes: group [I] -> a table of I items."""
        rowptr = torch.zeros(int(group.max()) + 2, dtype=torch.long)
        torch.cumsum(torch.bincount(self.item, minlength=len(rowptr) - 1), 0, out=rowptr[1:])
        item, entry = csr_entries(rowptr, group)
        return Neighbours(
            item, self.other[entry], self.similarity[entry], self.rank[entry], self.depth
        )

    def matrix(self, neighbours: int, num_items: int) -> Tensor:
        """S with each item's `neighbours` best kept: sparse CSR [items, items]."""
        keep = self.rank < neighbours
        rowptr = torch.zeros(num_items + 1, dtype=torch.long)
        torch.cumsum(torch.bincount(self.item[keep], minlength=num_items), 0, out=rowptr[1:])
        with quiet_csr():
            return torch.sparse_csr_tensor(
                rowptr,
                self.other[keep],
                self.similarity[keep],
                (num_items,) * 2,
                check_invariants=False,  # sorted by construction (class doc)
            )


class ItemKNN:
    """score(u, i) = sum_j x_uj S_ji + self_weight x_ui, with S_ji = cos(x_:j, x_:i) n / (n + shrink)
    (n the users with both, x+ the positive part of x) kept for the `neighbours` most similar items
    i of each item j (0 elsewhere and on the diagonal); x = `confidence()`, negative where "not
    interested" outweighs, which then pushes similar items down.

    Similarities are computed `chunk` items at a time, as a sparse product (only pairs of items
    that share a user cost anything) written into a chunk x items block for the top-N, so 92k
    items never need an items x items matrix. They depend on the history and `shrink` alone, so a
    grid's settings share them through `memo` (the deepest first, the others truncate it).
    """

    def __init__(
        self,
        neighbours: int = 50,
        shrink: float = 0.0,
        self_weight: float = 0.0,
        chunk: int = 1024,
        memo: Memo | None = None,
    ) -> None:
        self.neighbours, self.shrink, self.self_weight = neighbours, shrink, self_weight
        self.chunk = chunk
        self.memo = memo or Memo()
        self.pairs: PairMatrix | None = None
        self.similarity: Tensor | None = None  # S, sparse CSR [items, items]

    def fit(self, history: Interactions) -> None:
        self.pairs = pairs = history.confidence()
        table = self.memo.get(
            "itemknn",
            (history, self.shrink),
            lambda: self._neighbours(pairs),
            enough=lambda table: table.depth >= self.neighbours,
        )
        self.similarity = table.matrix(self.neighbours, pairs.num_items)

    def _neighbours(self, pairs: PairMatrix) -> Neighbours:
        num_users, num_items = pairs.num_users, pairs.num_items
        value = pairs.value.clamp(min=0.0)
        norm = torch.zeros(num_items).index_add_(0, pairs.item, value.square()).sqrt()
        by_item = sparse(
            pairs.item,
            pairs.user,
            value / norm[pairs.item].clamp(min=1e-30),
            (num_items, num_users),
        )  # sorted by item, then user
        blocks = [(by_item, False)] + ([(by_item.sign(), True)] if self.shrink else [])
        entry_item, entry_user = by_item.indices()
        active = (norm > 0).nonzero().flatten()  # the only items with similarities
        column = torch.full((num_items,), -1, dtype=torch.long)
        column[active] = torch.arange(len(active))
        depth = min(self.neighbours, num_items)
        parts = []
        block_of_chunk = torch.empty(min(self.chunk, len(active)), len(active))  # reused: no page
        for start in range(0, len(active), self.chunk):  # faults for a fresh block every chunk
            items = active[start : start + self.chunk]
            lo, hi = torch.searchsorted(entry_item, torch.stack([items[0], items[-1] + 1])).tolist()
            local = torch.searchsorted(items, entry_item[lo:hi])
            similarity = block_of_chunk[: len(items)].zero_()
            for matrix, counting in blocks:  # cosines, then (with shrink) co-occurrence counts
                block = sparse(
                    entry_user[lo:hi], local, matrix.values()[lo:hi], (num_users, len(items))
                )
                product = sparse_product(matrix, block).coalesce()  # co-occurring pairs only
                other, mine = product.indices()
                if counting:
                    count = product.values()
                    similarity[mine, column[other]] *= count / (count + self.shrink)
                else:
                    similarity[mine, column[other]] = product.values()
            similarity[torch.arange(len(items)), column[items]] = 0.0
            parts.append(Neighbours.from_rows(items, similarity, depth, active))
        return Neighbours.concat(parts, depth)

    def score(self, users: Tensor) -> Tensor:
        assert self.pairs is not None and self.similarity is not None, "fit first"
        own = self.pairs.rows(users).to_sparse_csr()
        scores = neighbour_scores(own, self.similarity)
        return scores + self.self_weight * own.to_dense() if self.self_weight else scores


def neighbour_scores(own: Tensor, similarity: Tensor) -> Tensor:
    """sum_j x_uj S_ji: each user's items passing their weight to their neighbours.
    Shapes: own sparse CSR [U, items], similarity sparse CSR [items, items] -> dense [U, items]."""
    return sparse_product(own, similarity).to_dense()  # entries x their neighbours
