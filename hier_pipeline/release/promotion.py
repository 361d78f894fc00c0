"""Releasing a model: its tree, tokens and checkpoint replace the serving ones (`serving.py`) only
if its evaluation beats the gate baseline (popularity) on the target metric and is not worse than
the serving model's, beyond a tolerance. The figure judged is the served model's own score
(`served_row`: `SERVED` where the evaluation scored it, else our row). Otherwise the serving
folder stays as it was, and the caller marks the run. The gate is checked here, not only by
the evaluation's blocking check, so a release run on its own cannot serve a model that loses to
popularity.

Token ids of the new tree are matched to the serving tree's (`interests/matching.py`) before the
swap, so a retrain renames only the interests whose meaning changed.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from hier_pipeline.evaluation.report import GATE, served_row
from hier_pipeline.files.atomic import atomic_path
from hier_pipeline.interests.artifact import (
    HIERARCHY_FILE,
    TOKENS_FILE,
    VOCABULARY_FILE,
    TokensArtifact,
    load_hierarchy,
    load_tokens,
)
from hier_pipeline.interests.matching import stable_token_ids
from hier_pipeline.release.serving import MODEL_FILE, read_manifest, swap_in, write_release


@dataclass(frozen=True)
class PromotionConfig:
    metric: str = "map@10"  # of our model on the target stage, from the evaluation report
    tolerance: float = 0.005  # absolute: a candidate this much below the serving model passes
    min_overlap: float = 0.5  # Jaccard of items for a new primitive to keep an old token id
    gate: str = GATE  # the baseline a released model must beat, in the same evaluation


@dataclass(frozen=True)
class Promotion:
    folder: Path  # the serving folder, released to or kept
    promoted: bool
    metric: str
    candidate: float
    current: float | None  # the serving model's score; None when nothing served yet
    reason: str
    ids_kept: int = 0  # token ids the new tree took over from the serving one
    ids: int = 0  # token ids of the serving tree
    gate: float | None = None  # the gate baseline's score; None when the evaluation lacks it

    @property
    def model(self) -> Path:
        return self.folder / MODEL_FILE


def promote(
    models: Mapping[str, Mapping[str, float]],
    model: Path,
    tokens: TokensArtifact,
    folder: Path,
    config: PromotionConfig,
    manifest: dict[str, Any],
) -> Promotion:
    """Serve `model` and `tokens` from `folder` if the evaluation's figures (`models`, name ->
    metric -> value, judged on `served_row`) pass `verdict`; else leave `folder` as is."""
    previous = read_manifest(folder)
    judged = models[served_row(models)]
    candidate = float(judged[config.metric])
    gate = models.get(config.gate, {}).get(config.metric)
    gate = None if gate is None else float(gate)
    current = None if previous is None else float(previous["metrics"][config.metric])
    accepted, reason = verdict(candidate, gate, current, config)
    outcome = Promotion(folder, accepted, config.metric, candidate, current, reason, gate=gate)
    if not accepted:
        return outcome
    staging = folder.with_name(f".{folder.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    scores = {**manifest, "metric": config.metric, "metrics": dict(judged)}
    write_release(tokens, model, staging, {**scores, "gate": {config.gate: gate}})
    kept, total = (0, 0) if previous is None else _keep_token_ids(folder, staging, config)
    swap_in(staging, folder)
    return Promotion(folder, True, config.metric, candidate, current, reason, kept, total, gate)


def verdict(
    candidate: float, gate: float | None, current: float | None, config: PromotionConfig
) -> tuple[bool, str]:
    """(promote?, why), for the UI and the run's tags."""
    if math.isnan(candidate):
        return False, f"the candidate's {config.metric} is undefined"
    if gate is None:
        return False, f"the evaluation did not score {config.gate}: nothing to gate on"
    if not candidate > gate:
        return False, (
            f"does not beat {config.gate}: {config.metric} {candidate:.4f} against {gate:.4f}"
        )
    if current is None:
        return True, f"nothing served yet; beats {config.gate}"
    compared = (
        f"{config.metric} {candidate:.4f} against the serving {current:.4f}"
        f" (tolerance {config.tolerance})"
    )
    if candidate < current - config.tolerance:
        return False, f"worse: {compared}"
    return True, f"not worse: {compared}"


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
