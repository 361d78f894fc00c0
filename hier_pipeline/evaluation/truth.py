"""A known taxonomy of the items, to score the interest hierarchy against: NMI/ARI per level."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.evaluation.report import LevelScore
from hier_pipeline.interests.entities import primary_keys
from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.quality import level_agreement


def item_truth(folder: Path, spec: DatasetSpec, database: Path) -> np.ndarray | None:
    """Shapes: -> [items, levels] labels in item node order, coarse -> fine, or None.

    Read from `folder/truth/<item table>.parquet`: first column the item key, each `*_id` column
    one level (the synthetic world writes its planted hierarchy there; a real dataset may put its
    category tree there). Outside dataset.yaml on purpose: the pipeline never trains on it.
    """
    item = spec.roles.item
    path = folder / "truth" / f"{item}.parquet"
    if not path.is_file():
        return None
    table = pd.read_parquet(path)
    table = table.set_index(table.columns[0])
    table.index = table.index.astype(str)
    levels = [c for c in table.columns if c.endswith("_id")]
    keys = primary_keys(database, spec, [item])[item]
    return table.loc[keys, levels].to_numpy()


def level_scores(tree: InterestHierarchy, truth: np.ndarray | None) -> list[LevelScore]:
    """Per tree level, its size and agreement with the truth level of the same depth (the finest
    truth level for deeper tree levels); no agreement without a truth."""
    scores = []
    for level, size in enumerate(tree.primitives_per_level()):
        if truth is None:
            scores.append(LevelScore(size, None, None))
            continue
        agreement = level_agreement(
            tree.members[:, level], truth[:, min(level, truth.shape[1] - 1)]
        )
        scores.append(LevelScore(size, agreement["nmi"], agreement["ari"], agreement["ami"]))
    return scores
