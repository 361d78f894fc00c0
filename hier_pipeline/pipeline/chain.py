"""The stages in one process, without Dagster: for the command line, benchmarks and `torchrun`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from hier_pipeline.content.tables import embed_tables
from hier_pipeline.dataset import load_dataset, parse_dataset
from hier_pipeline.files.atomic import write_atomically
from hier_pipeline.graph import RelationalGraph, TemporalSplit, build_graph, default_split
from hier_pipeline.model.artifact import save_model
from hier_pipeline.model.distributed import join_cluster
from hier_pipeline.model.train import TrainConfig, TrainResult, train_model


@dataclass
class Prepared:
    graph: RelationalGraph
    content: dict[str, dict[str, torch.Tensor]]
    split: TemporalSplit
    database: Path  # the validated tables (DuckDB), for what reads keys and text from them


def prepare(dataset_dir: Path, work_dir: Path, content_cache: Path) -> Prepared:
    """Load and validate, build the graph, embed content; `work_dir` holds this process's files."""
    spec = parse_dataset(dataset_dir)
    report = load_dataset(spec, work_dir / "raw.duckdb")
    graph = build_graph(spec, report.database)
    content = embed_tables(spec, report.database, content_cache, work_dir / "content.pt").load()
    return Prepared(graph, content, default_split(graph), report.database)


def fit(dataset_dir: Path, out_dir: Path, config: TrainConfig) -> TrainResult:
    """Train on a dataset folder. Under `torchrun` every rank prepares its own copy of the inputs
    (in `out_dir/rank<r>`), trains its shard of each batch, and rank 0 writes the model."""
    cluster = join_cluster()
    work = out_dir / f"rank{cluster.rank}"
    work.mkdir(parents=True, exist_ok=True)
    prepared = prepare(dataset_dir, work, out_dir / "content_cache")
    result = train_model(
        prepared.graph,
        prepared.content,
        prepared.split,
        config,
        checkpoint_dir=work / "checkpoints",
    )
    checksum = float(sum(p.detach().double().sum() for p in result.model.parameters()))
    summary = {
        "rank": cluster.rank,
        "world_size": cluster.world_size,
        "history": result.history,
        "weights_checksum": checksum,
    }
    write_atomically(work / "summary.json", json.dumps(summary, indent=2))
    if cluster.is_main:
        save_model(result.model, out_dir / "model.pt")
    return result
