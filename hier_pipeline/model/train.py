"""Train the interest model on the events before t1; validate on the window [t1, t2).

Steps are `Trainer.step` (`trainer.py`). Each epoch ends with full-ranking validation (MAP@k of
the target stage), a checkpoint, MLflow metrics, and early stopping on that MAP.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.split import TemporalSplit
from hier_pipeline.model.checkpoint import load_checkpoint, save_checkpoint
from hier_pipeline.model.device import resolve_device
from hier_pipeline.model.factory import GraphEncoder
from hier_pipeline.model.progress import TimeBudget, epoch_record
from hier_pipeline.model.train_config import TrainConfig
from hier_pipeline.model.trainer import Trainer

if TYPE_CHECKING:
    from hier_pipeline.tracking import TrackedRun


@dataclass
class TrainResult:
    model: GraphEncoder
    best_epoch: int
    best_map: float
    history: list[dict[str, float]]


def train_model(
    graph: RelationalGraph,
    content: dict[str, dict[str, Tensor]],
    split: TemporalSplit,
    config: TrainConfig = TrainConfig(),
    run: TrackedRun | None = None,
    checkpoint_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> TrainResult:
    """Train with early stopping on validation MAP@k; resumes from `checkpoint_dir/last.pt` if any."""
    on_gpu = resolve_device(config.device, config.deterministic).type == "cuda"
    with deterministic_kernels(config.deterministic, warn_only=on_gpu):
        return _train(graph, content, split, config, run, checkpoint_dir, progress)


@contextmanager
def deterministic_kernels(enabled: bool, warn_only: bool = False) -> Iterator[None]:
    """Use PyTorch's deterministic kernels inside, if `enabled`. Why: the backward of indexing
    rows by an edge list sums gradients into the same rows from several CPU threads, in an
    order that changes from run to run, so two trainings of one seed end with different
    weights (measured: every run of four in one process, and the ranked figures of one commit
    at the third decimal between processes). The deterministic kernels sort first.
    `warn_only`: an op without a deterministic kernel warns instead of raising (on a GPU,
    where not every op the model uses has one)."""
    before = torch.are_deterministic_algorithms_enabled()
    before_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(enabled or before, warn_only=warn_only)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before, warn_only=before_warn_only)


def _train(
    graph: RelationalGraph,
    content: dict[str, dict[str, Tensor]],
    split: TemporalSplit,
    config: TrainConfig,
    run: TrackedRun | None,
    checkpoint_dir: Path | None,
    progress: Callable[[str], None] | None,
) -> TrainResult:
    trainer = Trainer(graph, content, split, config)
    state = load_checkpoint(checkpoint_dir, trainer.restorable()) if checkpoint_dir else None
    history: list[dict[str, float]] = state.history if state else []
    best_epoch, best_map = (state.best_epoch, state.best_map) if state else (-1, -1.0)
    best_weights = state.best_weights if state else None
    metric = f"val/map@{config.eval_k}"
    budget = TimeBudget(config.time_budget_seconds)
    for epoch in range(len(history), config.epochs):
        started = time.perf_counter()
        trainer.model.train()
        parts = []
        for step in range(config.steps_per_epoch):
            parts.append(trainer.step(epoch * config.steps_per_epoch + step))
            if budget.spent(time.perf_counter() - started):
                break
        seconds = time.perf_counter() - started
        budget.charge(seconds)
        record = epoch_record(parts, seconds, config.batch_size)
        validation_started = time.perf_counter()
        record.update(trainer.validate())
        record["time/validation_seconds"] = time.perf_counter() - validation_started
        history.append(record)
        if record[metric] > best_map:
            best_epoch, best_map = epoch, record[metric]
            best_weights = {
                k: v.detach().to("cpu", copy=True) for k, v in trainer.model.state_dict().items()
            }
        if run is not None and trainer.cluster.is_main:
            run.log_metrics(record, step=epoch)
        if progress is not None:
            progress(
                f"epoch {epoch + 1}/{config.epochs}: loss {record['loss/total']:.3f}, {metric} {record[metric]:.4f}"
            )
        if checkpoint_dir is not None and trainer.cluster.is_main:
            assert best_weights is not None
            save_checkpoint(
                checkpoint_dir, trainer.restorable(), history, best_epoch, best_map, best_weights
            )
        if epoch - best_epoch >= config.patience or budget.spent():
            break
    if best_weights is not None:
        trainer.model.load_state_dict(best_weights)
    # On the CPU, wherever it trained: every artifact and every later stage reads it there.
    return TrainResult(trainer.model.cpu(), best_epoch, best_map, history)
