"""The first step of every run: load and validate a dataset folder, build its graph, embed its
content. Everything after it reads what `prepare` returns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from hier_pipeline.content.tables import embed_tables
from hier_pipeline.dataset import load_dataset, parse_dataset
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.graph import RelationalGraph, TemporalSplit, build_graph, default_split


@dataclass
class Prepared:
    spec: DatasetSpec
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
    return Prepared(spec, graph, content, default_split(graph), report.database)
