"""Content kNN: items whose text and image resemble what the user engaged with. The one baseline
that scores cold items as well as warm ones, since it needs nothing but their content.

Two forms, a grid axis: a profile (the mean of the user's item vectors, one cosine per item) or
item kNN in content space (each of the user's items passes its weight to its nearest items by
content), the form practitioners mean by "content kNN". A grocery basket mixes milk, nappies and
batteries, and its mean resembles none of them: on Complete Journey's tuning window the kNN form
scored MAP@10 0.026 / recall@50 0.064 where the profile scored 0.017 / 0.035.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions, PairMatrix, sparse
from hier_pipeline.evaluation.baselines.itemknn import Neighbours, neighbour_scores
from hier_pipeline.evaluation.baselines.recommender import Memo


def item_vectors(content: Mapping[str, Tensor], num_items: int) -> Tensor:
    """Unit text vector and unit image vector side by side (zeros where absent), renormalised: text
    and image count equally. An item without content is all zeros and scores 0 for everyone.

    Shapes: content {"text": [I, 384], "has_text": [I], "image": [I, 1280], "has_image": [I]}
    (either modality may be missing) -> [I, d].
    """
    parts = [
        F.normalize(content[name].float(), dim=1) * content[f"has_{name}"].unsqueeze(1)
        for name in ("text", "image")
        if name in content
    ]
    if not parts:
        return torch.zeros(num_items, 1)
    return F.normalize(torch.cat(parts, dim=1), dim=1)


class ContentKNN:
    """With `neighbours` None: score(u, i) = cos(p_u, v_i), the profile p_u = sum_j w_uj v_j over
    the user's items. With `neighbours` N: score(u, i) = sum_j w_uj cos(v_j, v_i) over the items i
    among the N nearest of j (j itself included: an item is its own nearest). w the stage weights
    decayed with `half_life_days` (None: no decay); v = `item_vectors`.

    Nearest items are found `chunk` items at a time (chunk x items cosines in memory); they
    depend on the content alone, so the settings of a grid share them through `memo`.
    """

    def __init__(
        self,
        content: Mapping[str, Tensor],
        half_life_days: float | None = 30.0,
        neighbours: int | None = None,
        chunk: int = 2048,
        memo: Memo | None = None,
    ) -> None:
        self.content = content
        self.half_life_days, self.neighbours, self.chunk = half_life_days, neighbours, chunk
        self.memo = memo or Memo()
        self.items = torch.zeros(0, 0)
        self.profiles = torch.zeros(0, 0)
        self.pairs: PairMatrix | None = None
        self.similarity: Tensor | None = None  # sparse CSR [items, items] in the kNN form

    def fit(self, history: Interactions) -> None:
        self.items = item_vectors(self.content, history.num_items)
        self.pairs = pairs = history.pair_weights(self.half_life_days)
        if self.neighbours is None:
            weights = sparse(
                pairs.user, pairs.item, pairs.value, (pairs.num_users, pairs.num_items)
            )
            self.profiles = F.normalize(torch.sparse.mm(weights, self.items), dim=1)
            return
        depth = min(self.neighbours, history.num_items)
        table = self.memo.get(
            "content_neighbours",
            (history.num_items,),
            lambda: self._nearest(depth),
            enough=lambda table: table.depth >= depth,
        )
        self.similarity = table.matrix(depth, history.num_items)

    def _nearest(self, depth: int) -> Neighbours:
        """Items with the same vector share a row of nearest items, computed once (Complete
        Journey: 92k products, 19k distinct texts; 13 s instead of 63 on 2 threads)."""
        vectors, group = torch.unique(self.items, dim=0, return_inverse=True)
        parts = []
        for start in range(0, len(vectors), self.chunk):
            rows = torch.arange(start, min(start + self.chunk, len(vectors)))
            parts.append(Neighbours.from_rows(rows, vectors[rows] @ self.items.T, depth))
        return Neighbours.concat(parts, depth).expand(group)

    def score(self, users: Tensor) -> Tensor:
        if self.similarity is None:
            return self.profiles[users] @ self.items.T
        assert self.pairs is not None, "fit first"
        return neighbour_scores(self.pairs.rows(users).to_sparse_csr(), self.similarity)
