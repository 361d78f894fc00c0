"""The trained model, whoever asks for it: trained with early stopping, scored beside popularity
on the same validation window, saved, and (when tracked) logged and registered in MLflow. The
`interest_model` asset, `hier train` and the chain all get it from here, so "the trained model"
means one thing at every entry point."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlflow.entities.model_registry import ModelVersion
from torch import Tensor

from hier_pipeline.evaluation.baselines import popularity_metrics
from hier_pipeline.graph import RelationalGraph, TemporalSplit
from hier_pipeline.model.artifact import save_model
from hier_pipeline.model.train import TrainResult, train_model
from hier_pipeline.model.train_config import TrainConfig
from hier_pipeline.ranking.window import target_window
from hier_pipeline.release.registry import register_model
from hier_pipeline.tracking import TrackedRun


@dataclass(frozen=True)
class Registration:
    """Where the registered pyfunc reads the graph and content it embeds over."""

    run: TrackedRun
    name: str  # the registered model: `hier-<dataset>`
    graph: Path
    content: Path


@dataclass(frozen=True)
class TrainedModel:
    result: TrainResult
    path: Path | None  # the saved weights; None where this process does not write them
    popularity: dict[str, float]  # popularity's validation metrics on the model's window
    version: ModelVersion | None  # the registry version, when registered


def train_interest_model(
    graph: RelationalGraph,
    content: dict[str, dict[str, Tensor]],
    split: TemporalSplit,
    config: TrainConfig,
    path: Path | None,
    *,
    registration: Registration | None = None,
    checkpoints: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> TrainedModel:
    """Train (resuming from `checkpoints` if a killed run left one), save the weights to `path`,
    and with a `registration` log every epoch, popularity's figures and the weights to its run
    and register the pyfunc. Finished, the recovery points go: kept, the next run with the same
    config would restore the finished state instead of training."""
    run = registration.run if registration else None
    result = train_model(graph, content, split, config, run, checkpoints, progress)
    window = target_window(graph, split.t1, split.t2, config.max_eval_users, config.seed)
    popularity = popularity_metrics(graph, window, split.t1, config.eval_k)
    version = None
    if path is not None:
        save_model(result.model, path, config.neighbourhoods(len(graph.metadata.stages)))
    if registration is not None and path is not None:
        registration.run.log_metrics({f"baseline/popularity/{k}": v for k, v in popularity.items()})
        registration.run.log_artifact(path, "model")
        version = register_model(
            registration.run,
            registration.name,
            path,
            registration.graph,
            registration.content,
            config.model.dim,
        )
    if checkpoints is not None:
        shutil.rmtree(checkpoints, ignore_errors=True)
    return TrainedModel(result, path, popularity, version)
