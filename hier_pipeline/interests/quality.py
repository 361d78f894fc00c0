"""Agreement between two partitions of the same items: a level against the planted truth or a
known taxonomy, or two runs against each other (stability)."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import (
    adjusted_mutual_info_score,
    adjusted_rand_score,
    normalized_mutual_info_score,
)
from torch import Tensor

Labels = Tensor | np.ndarray


def level_agreement(assignments: Labels, truth: Labels) -> dict[str, float]:
    """{"nmi": normalised mutual information (arithmetic mean), "ami": the same adjusted for
    chance, "ari": adjusted Rand index}.

    NMI rewards any refinement of the truth (more clusters than true classes cost little) and is
    > 0 even for random labels with many clusters; AMI subtracts what random labels of the same
    sizes would score (0 for noise at any granularity); ARI is ~0 for random labels and penalises
    over-splitting. Together they say whether a level is the truth, a refinement, or noise.
    """
    a, b = _numpy(assignments), _numpy(truth)
    if a.shape != b.shape:
        raise ValueError(f"{a.shape[0]} assignments against {b.shape[0]} truth labels")
    return {
        "nmi": float(normalized_mutual_info_score(b, a)),
        "ami": float(adjusted_mutual_info_score(b, a)),
        "ari": float(adjusted_rand_score(b, a)),
    }


def chance_agreement(assignments: Labels, truth: Labels, seed: int = 0) -> dict[str, float]:
    """`level_agreement` of the same clusters (same sizes) shuffled across items: the floor a
    level must clear to have learned anything."""
    a = _numpy(assignments)
    return level_agreement(np.random.default_rng(seed).permutation(a), truth)


def _numpy(labels: Labels) -> np.ndarray:
    return labels.cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
