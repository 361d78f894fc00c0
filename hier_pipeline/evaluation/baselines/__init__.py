"""Baselines scored on the same split, window and candidates as the model (`evaluate_baselines`).

Each baseline is a `Recommender` (fit on `Interactions`, score every item for a batch of users);
`recommend` ranks all of them the same way and `tune` tries each one's grid, which always includes
the profiles (`profiles.py`: which funnel stages build a user's profile).
"""

from hier_pipeline.evaluation.baselines.content_knn import ContentKNN, item_vectors
from hier_pipeline.evaluation.baselines.ease import EASE
from hier_pipeline.evaluation.baselines.evaluate import (
    BASELINES,
    Baseline,
    BaselineEvaluation,
    evaluate_baselines,
)
from hier_pipeline.evaluation.baselines.graphsage import GraphSAGERecommender, HeteroSAGE
from hier_pipeline.evaluation.baselines.interactions import Interactions, PairMatrix
from hier_pipeline.evaluation.baselines.itemknn import ItemKNN
from hier_pipeline.evaluation.baselines.lightgcn import LightGCNRecommender
from hier_pipeline.evaluation.baselines.popularity import Popularity, popularity_metrics
from hier_pipeline.evaluation.baselines.profiles import Profile, profiled_grid
from hier_pipeline.evaluation.baselines.protocol import repeat_rate, warm_window
from hier_pipeline.evaluation.baselines.recommender import (
    UNSCORED,
    FitBudget,
    Memo,
    Profiled,
    Recommender,
    recommend,
)
from hier_pipeline.evaluation.baselines.repeat import Repeat
from hier_pipeline.evaluation.baselines.sasrec import SASRec
from hier_pipeline.evaluation.baselines.tifuknn import TIFUKNN
from hier_pipeline.evaluation.baselines.tuning import (
    STEPS,
    Halving,
    TuningResult,
    fit_and_rank,
    tune,
    tune_trained,
)

__all__ = [
    "BASELINES",
    "EASE",
    "STEPS",
    "TIFUKNN",
    "UNSCORED",
    "Baseline",
    "BaselineEvaluation",
    "ContentKNN",
    "FitBudget",
    "GraphSAGERecommender",
    "Halving",
    "HeteroSAGE",
    "Interactions",
    "ItemKNN",
    "LightGCNRecommender",
    "Memo",
    "PairMatrix",
    "Popularity",
    "Profile",
    "Profiled",
    "Recommender",
    "Repeat",
    "SASRec",
    "TuningResult",
    "evaluate_baselines",
    "fit_and_rank",
    "item_vectors",
    "popularity_metrics",
    "profiled_grid",
    "recommend",
    "repeat_rate",
    "tune",
    "tune_trained",
    "warm_window",
]
