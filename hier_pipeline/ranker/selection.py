"""How big the ranker's trees may grow, chosen on the fit window's own users.

Why. A fit window holds a few hundred to a few thousand relevant candidates, and how much a
classifier can learn from them depends on the dataset and on how strong its signals are: trees
of 31 leaves carve bands out of the signals that the next window does not repeat (synthetic
world, about 450 positives: 0.012 MAP@10 below the chosen size, mean of 3 seeds). A constant
cannot fit every window, so each candidate size is fitted on most of the window's users and
scored, as serving would score it, on the rest (`folds`-fold, by user, so no user's pairs are on
both sides), and the best mean MAP@k wins.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray

from hier_pipeline.ranking.metrics import UserItems, per_user_metrics


def user_folds(num_users: int, folds: int, seed: int) -> NDArray[np.int64]:
    """Each ranked user's fold in 0..folds-1, balanced and drawn by `seed`. Shapes: -> [U]."""
    order = np.random.default_rng(seed).permutation(num_users)
    fold = np.empty(num_users, dtype=np.int64)
    fold[order] = np.arange(num_users) % folds
    return fold


def candidate_ap(
    rows: NDArray[np.int64],
    items: NDArray[np.int64],
    scores: NDArray[np.floating],
    relevant: UserItems,
    users: NDArray[np.int64],
    k: int,
) -> NDArray[np.floating]:
    """AP@k (the evaluation's, `per_user_metrics`) of each of `users` with a relevant item, in
    row order (to pair two rankings of the same users), when each is shown their candidates
    best score first; a user's relevant items that are no candidate count as missed.

    Shapes: rows, items, scores [P] (rows index `relevant`'s users) -> [judged users]."""
    order = np.lexsort((-scores, rows))
    rows, items = rows[order], items[order]
    position = np.arange(len(rows)) - np.searchsorted(rows, rows)  # 0 = the user's best
    top = position < k
    topk = torch.full((relevant.num_users, k), -1, dtype=torch.long)
    topk[rows[top], position[top]] = torch.from_numpy(items[top])
    per_user = per_user_metrics(topk, relevant, (k,))[f"map@{k}"].numpy()
    judged = np.flatnonzero(relevant.counts().numpy() > 0)  # per_user's users, in order
    return per_user[np.isin(judged, users)]
