"""What an evaluation compares, besides the data: our trained models and how they embed, the
materialised tree the comparison's trees take their sizes from, the baselines and the protocol's
settings. `compare.py` runs it; `ours.py` makes our models' rows from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from hier_pipeline.evaluation.ablations import VIEWS
from hier_pipeline.evaluation.baselines.evaluate import BASELINE_WORKERS, BASELINES, FIT_BUDGET
from hier_pipeline.evaluation.baselines.recommender import FitBudget
from hier_pipeline.graph.sampler import SamplerConfig
from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.model.factory import GraphEncoder
from hier_pipeline.ranker.ranker import RankerConfig


@dataclass(frozen=True)
class HierarchyInputs:
    """The materialised interest tree, the token settings its bags were made with, its stability
    (per level agreement with a tree from another seed) and the items' known taxonomy, if any.

    Shapes: truth [items, truth levels] or None.
    """

    tree: InterestHierarchy
    tokens: TokenConfig
    stability: list[dict[str, float]]
    truth: np.ndarray | None = None


@dataclass(frozen=True)
class Comparison:
    """What to compare, besides the data: our trained models by name (`hier` and any trained
    ablations), the neighbourhoods they embed from (as served), our model's training history."""

    models: Mapping[str, GraphEncoder]
    sampling: SamplerConfig
    # Models that sample otherwise than `sampling` (a trained ablation of it, `ablations.py`).
    model_sampling: Mapping[str, SamplerConfig] = field(default_factory=dict)
    history: list[dict[str, float]] = field(default_factory=list)
    views: tuple[str, ...] = VIEWS  # the untrained ablations to add (`ablations.VIEWS`)
    baselines: Sequence[str] = tuple(BASELINES)
    max_users: int = 5000  # evaluated users: a fixed random subset beyond it
    seed: int = 0
    budget: FitBudget = FIT_BUDGET
    baseline_workers: int = BASELINE_WORKERS  # processes the baselines are tuned in, side by side
    ranker: RankerConfig = field(default_factory=RankerConfig)  # its seed: `seed`
