"""How big the ranker's trees may grow, chosen on the fit window's own users.

Why. A fit window holds a few hundred to a few thousand relevant candidates, and how much a
classifier can learn from them depends on the dataset and on how strong its signals are: on the
synthetic world (about 450 positives) trees of 31 leaves carve bands out of a strong embedding
that the next window does not repeat, and lose about 0.015 MAP@10 to trees of 7 leaves, while a
larger window needs the larger trees. So the size is not a constant: each candidate size is
fitted on most of the window's users and scored, as serving would score it, on the rest
(`folds`-fold, by user, so no user's pairs are on both sides), and the best mean MAP@k wins.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def user_folds(num_users: int, folds: int, seed: int) -> NDArray[np.int64]:
    """Each ranked user's fold in 0..folds-1, balanced and drawn by `seed`. Shapes: -> [U]."""
    order = np.random.default_rng(seed).permutation(num_users)
    fold = np.empty(num_users, dtype=np.int64)
    fold[order] = np.arange(num_users) % folds
    return fold


def candidate_map(
    rows: NDArray[np.int64],
    scores: NDArray[np.floating],
    labels: NDArray[np.bool_],
    relevant_counts: NDArray[np.int64],
    users: NDArray[np.int64],
    k: int,
) -> float:
    """MAP@k of `users` when each is shown their candidates best score first (RelBench's MAP:
    average precision over min(|relevant|, k)); a user's relevant items that are no candidate
    count as missed. Users without a relevant item are left out; none left: NaN.

    Shapes: rows, scores, labels [P] (rows index the ranked users); relevant_counts [U]."""
    judged = users[relevant_counts[users] > 0]
    if len(judged) == 0:
        return float("nan")
    keep = np.isin(rows, judged)
    rows, scores, labels = rows[keep], scores[keep], labels[keep]
    order = np.lexsort((-scores, rows))
    rows, labels = rows[order], labels[order].astype(np.float64)
    first = np.searchsorted(rows, rows, side="left")
    position = np.arange(len(rows)) - first  # 0 = the user's best-scored candidate
    cumulative = np.cumsum(labels)
    hits_so_far: NDArray[np.float64] = (
        cumulative - (cumulative - labels)[first]
    )  # within the user's list
    precision = np.where(position < k, labels * hits_so_far / (position + 1), 0.0)
    precision_sum = np.bincount(rows, weights=precision, minlength=len(relevant_counts))
    return float((precision_sum[judged] / np.minimum(relevant_counts[judged], k)).mean())
