"""The pipeline's stages and their peers as benchmark steps for `bench_scale.py`.

Each step runs in a spawned child (`harness.measure`) with `(dataset folder, work folder)`, reads
what the stage before it left in the work folder, as an asset does, and returns what it processed:
`count` items in `work_s` seconds of the stage's own work (reading its inputs excluded), plus
whatever explains the number. The heavy imports are at module level, so a child has them loaded
before its clock starts: wall times are the stage's, not Python's start-up.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench_content_encoders import rates
from bench_graph import sampler_throughput
from bench_load import contract_load
from bench_model import variants
from torch import Tensor

from hier_pipeline.content import ContentConfig, TextEncoder, embed_content
from hier_pipeline.content.tables import ContentArtifact, embed_tables
from hier_pipeline.content.text_encoder import packaged_model_dir
from hier_pipeline.dataset import parse_dataset
from hier_pipeline.dataset.sql import open_database, quote
from hier_pipeline.evaluation.baselines import FitBudget, Interactions, LightGCNRecommender
from hier_pipeline.graph import (
    RelationalGraph,
    TemporalSplit,
    build_graph,
    default_split,
    load_graph,
    save_graph,
)
from hier_pipeline.interests.artifact import HIERARCHY_FILE, HierarchyArtifact, load_tokens
from hier_pipeline.interests.build import build_interest_hierarchy, build_interest_tokens
from hier_pipeline.interests.entities import item_texts
from hier_pipeline.interests.hierarchy import HierarchyConfig
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.model.artifact import load_model, save_model
from hier_pipeline.model.embeddings import EmbeddingArtifact, embed_entities
from hier_pipeline.model.train_config import TrainConfig
from hier_pipeline.model.trainer import Trainer
from hier_pipeline.synthetic import SyntheticConfig, generate_world

DATABASE, GRAPH, CONTENT = "raw.duckdb", "graph.pt", "content.pt"
MODEL, EMBEDDINGS, INTERESTS = "model.pt", "embeddings.pt", "interests"
SAMPLER_SEEDS = 4096  # per seed type
LIGHTGCN_STEPS = 40  # most steps of LightGCN timed (see `lightgcn`)
PEER_TEXTS = 1000  # texts each encoder gets per round in the sentence-transformers comparison


class Clock:
    """Wall and process CPU seconds spent inside `with clock.running():` blocks. On a shared
    machine the CPU seconds are the steadier measure: another process on the core stretches wall
    time, not CPU time."""

    def __init__(self) -> None:
        self.seconds = self.cpu_seconds = 0.0

    @contextmanager
    def running(self) -> Iterator[None]:
        started, cpu = time.perf_counter(), time.process_time()
        yield
        self.seconds += time.perf_counter() - started
        self.cpu_seconds += time.process_time() - cpu


def _done(count: int, clock: Clock, **details: Any) -> dict[str, Any]:
    return {
        "count": int(count),
        "work_s": round(clock.seconds, 3),
        "work_cpu_s": round(clock.cpu_seconds, 3),
        **details,
    }


def _inputs(work: str) -> tuple[RelationalGraph, dict[str, dict[str, Tensor]], TemporalSplit]:
    """The graph and content vectors the earlier stages left, and the default split."""
    graph = load_graph(Path(work) / GRAPH)
    content = ContentArtifact(Path(work) / CONTENT).load()
    return graph, content, default_split(graph)


def generate(folder: str, work: str, scale: float) -> dict[str, Any]:
    clock = Clock()
    with clock.running():
        generate_world(Path(folder), SyntheticConfig(scale=scale))
    summary = json.loads((Path(folder) / "truth" / "world.json").read_text())
    rows = summary["counts"]
    return _done(sum(rows.values()), clock, rows=rows, images=summary["images"])


def load(folder: str, work: str) -> dict[str, Any]:
    clock = Clock()
    with clock.running():
        report = contract_load(folder, str(Path(work) / DATABASE))
    return _done(report["rows"], clock, **report)


def graph(folder: str, work: str) -> dict[str, Any]:
    clock = Clock()
    with clock.running():
        built = build_graph(parse_dataset(folder), Path(work) / DATABASE)
        save_graph(built, Path(work) / GRAPH)
    data = built.data
    nodes = sum(int(data[t].num_nodes) for t in data.node_types)
    edges = sum(int(data[t].edge_index.shape[1]) for t in data.edge_types)
    events = int(data[built.metadata.engaged].edge_index.shape[1])
    return _done(nodes + edges, clock, nodes=nodes, edges=edges, events=events)


def texts(folder: str, work: str) -> dict[str, Any]:
    """Every text, images left out (declared away): the images step then finds them cached."""
    spec = parse_dataset(folder)
    text_only = replace(
        spec, tables={name: replace(t, image=None) for name, t in spec.tables.items()}
    )
    clock = Clock()
    with clock.running():
        artifact = embed_tables(
            text_only, Path(work) / DATABASE, Path(work) / "content_cache", Path(work) / CONTENT
        )
    tables = artifact.tables.values()
    return _done(
        sum(t.text_misses for t in tables),
        clock,
        with_text=sum(t.with_text for t in tables),
        distinct_encoded=sum(t.text_misses for t in tables),
    )


def images(folder: str, work: str, limit: int | None) -> dict[str, Any]:
    """The content stage in full (texts come from the cache), or, past `limit` images, the first
    `limit` of them through the same encoder, and the later stages keep the text-only vectors."""
    spec = parse_dataset(folder)
    database = Path(work) / DATABASE
    columns = {t.name: t.image for t in spec.tables.values() if t.image and t.file}
    with open_database(database) as connection:
        frames = {
            table: connection.execute(
                f"SELECT __row, {quote(column)} FROM raw.{quote(table)} "
                f"WHERE {quote(column)} IS NOT NULL ORDER BY __row"
            ).fetchdf()
            for table, column in columns.items()
        }
    total = sum(len(f) for f in frames.values())
    clock = Clock()
    if limit is None or total <= limit:
        with clock.running():
            artifact = embed_tables(
                spec, database, Path(work) / "content_cache", Path(work) / CONTENT
            )
        encoded = sum(t.image_misses for t in artifact.tables.values())
        return _done(encoded, clock, with_image=total, sampled=None)
    encoded, left = 0, limit
    for table, column in columns.items():
        if left == 0:
            break
        config = ContentConfig(id_column="__row", image_column=column, image_dir=spec.root)
        with clock.running():
            embedded = embed_content(frames[table].head(left), config)
        encoded += embedded.image_stats.misses
        left -= min(left, len(frames[table]))
    return _done(encoded, clock, with_image=total, sampled=limit)


def sample(folder: str, work: str) -> dict[str, Any]:
    """Temporal 2-hop sampling of users and items at their events' times (bench_graph's)."""
    graph = load_graph(Path(work) / GRAPH)
    clock = Clock()
    with clock.running():
        rates_by_type = sampler_throughput(graph, seeds=SAMPLER_SEEDS)
    per_type = [v for k, v in rates_by_type.items() if k.endswith("_seeds_per_s")]
    # the sampling share of the block (its index setup excluded), CPU time pro rata
    share = sum(SAMPLER_SEEDS / v for v in per_type) / clock.seconds
    clock.seconds, clock.cpu_seconds = share * clock.seconds, share * clock.cpu_seconds
    return _done(SAMPLER_SEEDS * len(per_type), clock, **rates_by_type)


def train(folder: str, work: str, steps: int, variant: str) -> dict[str, Any]:
    """`steps` optimisation steps of `variant` (bench_model's: "full" is ours, "hgt" PyG's
    HGTConv), after the trainer's setup; ours is saved for the inference step."""
    graph, content, split = _inputs(work)
    config = variants(TrainConfig())[variant]
    setup = time.perf_counter()
    trainer = Trainer(graph, content, split, config)
    setup_s = time.perf_counter() - setup
    clock = Clock()
    with clock.running():
        for index in range(steps):
            trainer.step(index)
    if variant == "full":
        sampling = config.neighbourhoods(len(graph.metadata.stages))
        save_model(trainer.model, Path(work) / MODEL, sampling)
    train_events = sum(len(events) for events in trainer.examples.by_stage)
    return _done(
        steps * config.batch_size,
        clock,
        setup_s=round(setup_s, 2),
        steps=steps,
        seconds_per_step=round(clock.seconds / steps, 4),
        train_events=train_events,
        epoch_s=round(train_events / (steps * config.batch_size) * clock.seconds, 1),
    )


def infer(folder: str, work: str) -> dict[str, Any]:
    graph, content, _ = _inputs(work)
    model = load_model(Path(work) / MODEL, graph, content)
    clock = Clock()
    with clock.running():
        artifact = embed_entities(
            model,
            graph,
            content,
            Path(work) / EMBEDDINGS,
            TrainConfig().neighbourhoods(len(graph.metadata.stages)),
        )
    return _done(sum(artifact.counts.values()), clock, entities=artifact.counts)


def hierarchy(folder: str, work: str) -> dict[str, Any]:
    graph = load_graph(Path(work) / GRAPH)
    embeddings = EmbeddingArtifact(Path(work) / EMBEDDINGS, 0, {})
    clock = Clock()
    with clock.running():
        built = build_interest_hierarchy(
            embeddings, graph, Path(work) / INTERESTS, HierarchyConfig()
        )
    items = int(graph.data[graph.metadata.item_type].num_nodes)
    return _done(items, clock, primitives_per_level=list(built.primitives_per_level))


def tokens(folder: str, work: str) -> dict[str, Any]:
    """Token bags for every entity; the count is tokens assigned (top-k per level per entity)."""
    folder_out = Path(work) / INTERESTS
    tree = HierarchyArtifact(folder_out / HIERARCHY_FILE, (), [], [])
    embeddings = EmbeddingArtifact(Path(work) / EMBEDDINGS, 0, {})
    spec = parse_dataset(folder)
    clock = Clock()
    with clock.running():
        artifact = build_interest_tokens(
            embeddings, tree, spec, Path(work) / DATABASE, folder_out, TokenConfig()
        )
    bags = load_tokens(artifact.path).bags.values()
    return _done(sum(int((b.tokens >= 0).sum()) for b in bags), clock, entities=artifact.counts)


def lightgcn(folder: str, work: str) -> dict[str, Any]:
    """An epoch of PyG's LightGCN (the evaluation's baseline): every distinct training (user,
    item) pair once, in its batches of 2,048. Each step propagates over the whole graph, so an
    epoch grows with pairs squared: past `LIGHTGCN_STEPS` steps it is extrapolated from them."""
    graph, _, split = _inputs(work)
    history = Interactions.from_graph(graph, split.t1)
    pairs = len(history.confidence().value)
    item_time = graph.data[graph.metadata.item_type].time
    batch = 2048
    epoch_steps = math.ceil(pairs / batch)
    steps = min(epoch_steps, LIGHTGCN_STEPS)
    recommender = LightGCNRecommender(item_time, budget=FitBudget(steps), batch_size=batch)
    clock = Clock()
    with clock.running():
        recommender.fit(history)
    return _done(
        steps * batch,
        clock,
        pairs=pairs,
        steps=steps,
        epoch_steps=epoch_steps,
        epoch_s=round(clock.seconds * epoch_steps / steps, 2),
    )


def text_peer(folder: str, work: str) -> dict[str, Any]:
    """Our text encoder against `SentenceTransformer.encode` with its defaults, same model, on
    this dataset's item texts, best of 2 interleaved rounds (bench_content_encoders' `rates`)."""
    from sentence_transformers import SentenceTransformer

    sample = [t for t in item_texts(Path(work) / DATABASE, parse_dataset(folder)) if t.strip()]
    sample = sample[:PEER_TEXTS]
    ours = TextEncoder()
    reference = SentenceTransformer(str(packaged_model_dir()), device="cpu")
    clock = Clock()
    with clock.running():
        best = rates(
            len(sample),
            {"ours": lambda: ours.encode(sample), "st": lambda: reference.encode(sample)},
            2,
        )
    return _done(
        len(sample),
        clock,
        ours_per_s=round(best["ours"], 1),
        sentence_transformers_per_s=round(best["st"], 1),
    )


def imports_only(folder: str, work: str) -> dict[str, Any]:
    """Nothing: the resident memory every step starts from (torch, PyG, DuckDB loaded)."""
    return _done(0, Clock())
