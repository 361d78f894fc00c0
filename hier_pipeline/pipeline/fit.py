"""`hier train`: train on a dataset folder, under `torchrun` or alone."""

from __future__ import annotations

import json
from pathlib import Path

from hier_pipeline.files.atomic import write_atomically
from hier_pipeline.model.device import resolve_device
from hier_pipeline.model.distributed import join_cluster
from hier_pipeline.model.train_config import TrainConfig
from hier_pipeline.pipeline.prepare import prepare
from hier_pipeline.pipeline.train import TrainedModel, train_interest_model


def fit(dataset_dir: Path, out_dir: Path, config: TrainConfig) -> TrainedModel:
    """Train on a dataset folder. Under `torchrun` every rank prepares its own copy of the inputs
    (in `out_dir/rank<r>`), trains its shard of each batch, and rank 0 writes the model."""
    cluster = join_cluster(resolve_device(config.device, config.deterministic))
    work = out_dir / f"rank{cluster.rank}"
    work.mkdir(parents=True, exist_ok=True)
    prepared = prepare(dataset_dir, work, out_dir / "content_cache")
    trained = train_interest_model(
        prepared.graph,
        prepared.content,
        prepared.split,
        config,
        out_dir / "model.pt" if cluster.is_main else None,
        checkpoints=work / "checkpoints",
    )
    result = trained.result
    checksum = float(sum(p.detach().double().sum() for p in result.model.parameters()))
    summary = {
        "rank": cluster.rank,
        "world_size": cluster.world_size,
        "history": result.history,
        "weights_checksum": checksum,
    }
    write_atomically(work / "summary.json", json.dumps(summary, indent=2))
    return trained
