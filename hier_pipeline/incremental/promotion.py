"""Promotion after a retrain: the new model, tree and tokens replace the serving ones only if the
evaluation scores them above the popularity baseline (the gate publishing has too, so that a
model that loses to popularity never serves, even where nothing serves yet) and not worse on the
target metric than the serving ones, beyond a tolerance. Otherwise the serving folder stays as it
was, and the caller marks the run.

The serving folder (`<home>/promoted/<dataset>/`) is self-contained: the model checkpoint beside
the published tokens, vocabulary, tree and embeddings (`evaluation.publish.publish_tokens`), and a
manifest with the metrics it was promoted on. It is written beside the old one and swapped in by
renames. Token ids of the new tree are matched to the serving tree's (`interests/matching.py`)
before the swap, so a retrain renames only the interests whose meaning changed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from hier_pipeline.atomic import atomic_path
from hier_pipeline.evaluation.publish import MANIFEST_FILE, publish_tokens
from hier_pipeline.interests.artifact import (
    HIERARCHY_FILE,
    TOKENS_FILE,
    VOCABULARY_FILE,
    TokensArtifact,
    find_interest_folder,
    load_hierarchy,
    load_tokens,
)
from hier_pipeline.interests.matching import stable_token_ids

PROMOTED = "promoted"
MODEL_FILE = "model.pt"


@dataclass(frozen=True)
class PromotionConfig:
    metric: str = "map@10"  # of our model on the target stage, from the evaluation report
    tolerance: float = 0.005  # absolute: a candidate this much below the serving model passes
    min_overlap: float = 0.5  # Jaccard of items for a new primitive to keep an old token id


@dataclass(frozen=True)
class Promotion:
    folder: Path  # the serving folder, promoted to or kept
    promoted: bool
    metric: str
    candidate: float
    current: float | None  # the serving model's score; None when nothing served yet
    reason: str
    ids_kept: int = 0  # token ids the new tree took over from the serving one
    ids: int = 0  # token ids of the serving tree

    @property
    def model(self) -> Path:
        return self.folder / MODEL_FILE


def serving_folder(home: Path, dataset: str) -> Path:
    return home / PROMOTED / dataset


def find_serving_folder(home: Path, dataset: str | None = None) -> Path:
    """What answers queries: the promoted folder (with the batches fitted into it since), or the
    interests stage's folder where nothing was promoted yet."""
    stage = find_interest_folder(home, dataset)
    promoted = serving_folder(home, stage.name)
    return promoted if (promoted / TOKENS_FILE).is_file() else stage


def promote(
    metrics: dict[str, float],
    model: Path,
    tokens: TokensArtifact,
    folder: Path,
    config: PromotionConfig,
    manifest: dict[str, Any],
    *,
    popularity: float | None,
) -> Promotion:
    """Serve `model` and `tokens` from `folder` if `metrics[config.metric]` is above
    `popularity` (the baseline's score in the same evaluation; None when it has none) and not
    worse than the serving model's beyond the tolerance (or nothing is served yet); else leave
    `folder` as is."""
    previous = read_manifest(folder)
    candidate = float(metrics[config.metric])
    current = None if previous is None else float(previous["metrics"][config.metric])
    accepted, reason = verdict(candidate, current, config, popularity)
    if not accepted:
        return Promotion(folder, False, config.metric, candidate, current, reason)
    staging = folder.with_name(f".{folder.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    publish_tokens(tokens, staging, {**manifest, "metric": config.metric, "metrics": metrics})
    shutil.copyfile(model, staging / MODEL_FILE)
    kept, total = (0, 0) if previous is None else _keep_token_ids(folder, staging, config)
    _swap(staging, folder)
    return Promotion(folder, True, config.metric, candidate, current, reason, kept, total)


def verdict(
    candidate: float, current: float | None, config: PromotionConfig, popularity: float | None
) -> tuple[bool, str]:
    """(promote?, why), for the UI and the run's tags."""
    if math.isnan(candidate):
        return False, f"the candidate's {config.metric} is undefined"
    if popularity is None or not candidate > popularity:  # a tie, or NaN, is no win
        against = "no popularity score" if popularity is None else f"popularity's {popularity:.4f}"
        return False, f"does not beat popularity: {config.metric} {candidate:.4f} against {against}"
    if current is None:
        return True, "nothing served yet"
    compared = (
        f"{config.metric} {candidate:.4f} against the serving {current:.4f}"
        f" (tolerance {config.tolerance})"
    )
    if candidate < current - config.tolerance:
        return False, f"worse: {compared}"
    return True, f"not worse: {compared}"


def read_manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / MANIFEST_FILE
    if not (path.is_file() and (folder / MODEL_FILE).is_file()):
        return None
    manifest: dict[str, Any] = json.loads(path.read_text())
    return manifest


def _keep_token_ids(serving: Path, staging: Path, config: PromotionConfig) -> tuple[int, int]:
    """Rename the staged tree's token ids after the serving tree's, in the tree and the
    vocabulary; returns (ids kept, ids)."""
    old_tokens, new_tokens = load_tokens(serving / TOKENS_FILE), load_tokens(staging / TOKENS_FILE)
    item = new_tokens.roles["item"]
    old, new = load_hierarchy(old_tokens.hierarchy), load_hierarchy(new_tokens.hierarchy)
    ids = stable_token_ids(
        old, old_tokens.keys[item], new, new_tokens.keys[item], config.min_overlap
    )
    renamed = dict(zip(new.token_ids, ids, strict=True))
    payload = torch.load(staging / HIERARCHY_FILE, weights_only=True)
    payload["hierarchy"]["token_ids"] = ids
    with atomic_path(staging / HIERARCHY_FILE) as partial:
        torch.save(payload, partial)
    vocabulary = pd.read_parquet(staging / VOCABULARY_FILE)
    vocabulary["token"] = vocabulary["token"].map(renamed)
    vocabulary["parent"] = vocabulary["parent"].map(lambda p: renamed.get(p, p))
    with atomic_path(staging / VOCABULARY_FILE) as partial:
        vocabulary.to_parquet(partial, index=False)
    return len(set(ids) & set(old.token_ids)), len(ids)


def _swap(staging: Path, folder: Path) -> None:
    """`staging` becomes `folder` by renames; the old folder (and its batch files, which index
    the old tree) goes."""
    retired = folder.with_name(f".{folder.name}.retired")
    shutil.rmtree(retired, ignore_errors=True)
    if folder.exists():
        os.replace(folder, retired)
    os.replace(staging, folder)
    shutil.rmtree(retired, ignore_errors=True)
