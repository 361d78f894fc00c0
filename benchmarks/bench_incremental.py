"""Incremental cost: a batch of ~1% new items (with their advertisers) through the incremental
path, against a full run of the pipeline on the data without it, and the new items' cold-start
retrieval quality.

    .venv/bin/python benchmarks/bench_incremental.py [DATASET_DIR] [--fraction 0.01]
        [--scale 1.0] [--epochs E] [--steps S] [--work DIR]

Without DATASET_DIR the synthetic world (`--scale`) is generated and `hier generate-batch` adds
the batch (new advertisers, their products and the first events; later purchases held out in
truth/). With DATASET_DIR, a copy is split: advertisers drawn at random until their items reach
`--fraction` of the items go, with every row that references those items, to incoming/batch0001
(events before the 90th percentile of event times; the later target-stage events are held out).

Full run (one fresh process): load + validate, graph, content (an empty cache: every text and
image embedded), training, entity embeddings, hierarchy, tokens. Incremental, cold (a fresh
process, reading what the full run wrote): `update_batch`, i.e. what `arrived_tables` +
`arrived_interests` run. Incremental, warm: the resident worker (`hier arrivals`), its state
read and its model and encoders loaded before the batch comes, fits the same batch (with the
content cache as the full run left it, so its texts and images are new to it too). Quality: recall@50 of the held-out purchases of new items among all
items, by embedding inner product, for the incremental embeddings and for a full rebuild of the
graph with the batch embedded by the same model (they should agree), beside the evaluation's
`cold_item_recall@50` of the same model on the base data (items first seen after t2); and
recall@10 with the batch's new items ranked among themselves, beside chance, which tells the two
apart where no new item reaches an all-items top 50.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import measure, write_results
from incremental_quality import BATCH, HELD_OUT, new_item_quality, train_config

WARM_CACHE = "content_cache_warm"  # the warm run's copy of the cache the full run left


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset_dir", type=Path, nargs="?", help="default: the synthetic world")
    parser.add_argument("--fraction", type=float, default=0.01)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--epochs", type=int, help="default: TrainConfig's")
    parser.add_argument("--steps", type=int, help="steps per epoch; default: TrainConfig's")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    arguments = parser.parse_args()
    work = arguments.work or Path(tempfile.mkdtemp(prefix="bench_incremental-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["BENCH_TRAIN"] = f"{arguments.epochs or ''},{arguments.steps or ''}"
    if arguments.dataset_dir is None:
        from hier_pipeline.synthetic import SyntheticConfig, generate_world
        from hier_pipeline.synthetic.arrivals import BatchConfig, generate_batch

        world = generate_world(work / "world", SyntheticConfig(scale=arguments.scale))
        generate_batch(world, BATCH, BatchConfig(arguments.fraction, seed=arguments.seed))
        _held_out_from_truth(world, work)
        name = f"incremental_synthetic_scale{arguments.scale:g}"
    else:
        world = work / "dataset"
        _split_off_batch(arguments.dataset_dir.resolve(), world, work, arguments)
        name = f"incremental_{arguments.dataset_dir.resolve().name}"
    out = work / "run"
    full = measure(_full_run, world, out)
    shutil.copytree(out / "content_cache", out / WARM_CACHE)  # as the full run left it
    incremental = measure(_incremental_run, world, out)
    warm = measure(_warm_run, world, out)
    quality = measure(new_item_quality, world, out)
    cold_share = incremental["wall_s"] / full["wall_s"]
    warm_share = warm["batch_wall_s"] / full["wall_s"]
    write_results(
        name,
        {
            "dataset": str(arguments.dataset_dir or "synthetic"),
            "fraction": arguments.fraction,
            "full_run": full,
            "incremental": incremental,
            "incremental_share_of_full": round(cold_share, 4),
            "within_5_percent": cold_share <= 0.05,
            "incremental_warm": warm,
            "incremental_warm_share_of_full": round(warm_share, 4),
            "warm_within_2_percent": warm_share <= 0.02,
            "quality": quality,
        },
    )
    return 0


def _full_run(folder: str, out: str) -> dict[str, Any]:
    """Every stage on the data without the batch, as a full run (or a retrain) does it."""
    import time

    from hier_pipeline.pipeline.chain import ChainConfig, run_chain
    from hier_pipeline.pipeline.prepare import prepare

    root, config = Path(out), train_config()
    started = time.perf_counter()
    prepared = prepare(Path(folder), root, root / "content_cache")
    seconds = {"load_graph_content": time.perf_counter() - started}
    done = run_chain(prepared, root, ChainConfig(train=config))
    seconds.update(done.seconds)
    graph, result = prepared.graph, done.trained.result
    return {
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "nodes": {t: int(graph.data[t].num_nodes) for t in graph.data.node_types},
        "epochs": len(result.history),
        "steps_per_epoch": config.steps_per_epoch,
    }


def _current(root: Path, content_cache: str) -> Any:
    """The state a batch is fitted into, as the full run left it under `root`."""
    import torch

    from hier_pipeline.graph import load_graph
    from hier_pipeline.incremental.update import Current
    from hier_pipeline.interests.artifact import load_tokens

    graph = load_graph(root / "graph.pt")
    return Current(
        warehouse=root / "raw.duckdb",
        graph=graph,
        content=torch.load(root / "content.pt", weights_only=True),
        model=root / "model.pt",
        tokens=load_tokens(root / "interests" / "tokens.pt"),
        folder=root / "interests",
        content_cache=root / content_cache,
    )


def _incremental_run(folder: str, out: str) -> dict[str, Any]:
    """The batch through the incremental path, one-shot, from what the full run left on disk."""
    from hier_pipeline.dataset import parse_dataset
    from hier_pipeline.incremental.update import update_batch

    root = Path(out)
    current = _current(root, "content_cache")
    update = update_batch(parse_dataset(Path(folder)), BATCH, current, root / "arrivals")
    return _described(update)


def _warm_run(folder: str, out: str) -> dict[str, Any]:
    """The resident worker: imports, state, model and encoders first (`warm_up_s`), then the
    batch (`batch_wall_s`), into an arrivals folder of its own."""
    import time

    from hier_pipeline.dataset import parse_dataset
    from hier_pipeline.incremental.worker import ArrivalsWorker

    root = Path(out)
    worker = ArrivalsWorker(
        parse_dataset(Path(folder)),
        lambda: _current(root, WARM_CACHE),
        lambda: 0,
        root / "arrivals_warm",
    )
    started = time.perf_counter()
    worker.warm_up()
    warmed = time.perf_counter()
    update = worker.run(BATCH)
    done = time.perf_counter()
    return {
        "warm_up_s": round(warmed - started, 2),
        "batch_wall_s": round(done - warmed, 2),
        **_described(update),
    }


def _described(update: Any) -> dict[str, Any]:
    return {
        "seconds": update.seconds,
        "entities": update.entities,
        "entities_embedded_again": update.refreshed,
        "rows": {t: r.accepted for t, r in update.load.tables.items()},
        "quarantined": {t: r.quarantined for t, r in update.load.tables.items()},
        "embedded": {t: c.text_misses + c.image_misses for t, c in update.content.tables.items()},
    }


def _held_out_from_truth(world: Path, work: Path) -> None:
    import pandas as pd

    held = pd.read_parquet(world / "truth" / "batches" / BATCH / "purchases.parquet")
    held[["user_id", "product_id"]].to_parquet(work / HELD_OUT, index=False)


def _split_off_batch(source: Path, target: Path, work: Path, arguments: Any) -> None:
    """A copy of `source` whose randomly drawn advertisers (up to `fraction` of the items), their
    items and every row that references a moved row (campaigns, events, ...) go to
    incoming/batch0001; the target-stage events of the new items at or after the 90th percentile
    of its times are held out of both (written to `work/held_out.parquet`)."""
    import shutil

    import numpy as np

    from hier_pipeline.dataset import parse_dataset
    from hier_pipeline.dataset.sql import connect, quote
    from hier_pipeline.dataset.staging import topological_order

    spec = parse_dataset(source)
    item = spec.tables[spec.roles.item]
    assert item.file is not None and item.primary_key is not None
    owner = next(
        (c for c, t in item.foreign_keys.items() if t == spec.roles.advertiser), item.primary_key
    )
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "dataset.yaml", target / "dataset.yaml")
    for folder in source.iterdir():  # images and the like; not earlier batches or the truth
        if folder.is_dir() and folder.name not in ("incoming", "truth"):
            shutil.copytree(folder, target / folder.name)
    batch = target / "incoming" / BATCH
    batch.mkdir(parents=True, exist_ok=True)
    connection = connect(memory_limit="4GB", threads=1)

    def read(path: Path) -> str:
        return f"read_{'parquet' if path.suffix == '.parquet' else 'csv_auto'}('{path}')"

    counts = connection.execute(
        f"SELECT {quote(owner)}, count(*) FROM {read(item.file)} GROUP BY ALL ORDER BY 1"
    ).fetchall()
    order = np.random.default_rng(arguments.seed).permutation(len(counts))
    total, chosen = sum(c for _, c in counts), list[int]()
    for i in order:
        if sum(counts[j][1] for j in chosen) >= arguments.fraction * total:
            break
        chosen.append(int(i))
    connection.execute("CREATE TABLE owners (k VARCHAR)")
    connection.executemany("INSERT INTO owners VALUES (?)", [[str(counts[i][0])] for i in chosen])
    target_stage = spec.target_stage
    stage_table = spec.tables[target_stage.table]
    assert stage_table.file is not None and stage_table.time is not None
    time = quote(stage_table.time)
    connection.execute(
        f"CREATE TABLE cut AS SELECT quantile_disc({time}, 0.9) AS t FROM {read(stage_table.file)}"
    )
    late_sql = f"{time} >= (SELECT t FROM cut)"
    moved_keys: dict[str, str] = {}  # table -> a table of its moved keys (k VARCHAR)
    for index, table in enumerate(topological_order(spec)):  # parents first: moves cascade
        assert table.file is not None
        chosen_here = {item.name: owner, spec.roles.advertiser: table.primary_key}.get(table.name)
        conditions = [
            f"CAST({quote(column)} AS VARCHAR) IN (SELECT k FROM {moved_keys[parent]})"
            for column, parent in table.foreign_keys.items()
            if parent in moved_keys
        ]
        if chosen_here:
            conditions.append(f"CAST({quote(chosen_here)} AS VARCHAR) IN (SELECT k FROM owners)")
        moved = " OR ".join(conditions) or "false"
        rows = read(table.file)
        if table.primary_key and conditions:
            moved_keys[table.name] = f"moved_{index}"
            connection.execute(
                f"CREATE TABLE moved_{index} AS SELECT CAST({quote(table.primary_key)} AS VARCHAR)"
                f" AS k FROM {rows} WHERE {moved}"
            )
        # The target stage's later events of the new items are held out, in neither part.
        late = late_sql if table.name == stage_table.name else "false"
        relative = table.file.relative_to(spec.root)
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        fmt = "PARQUET" if table.file.suffix == ".parquet" else "CSV, HEADER"
        connection.execute(
            f"COPY (SELECT * FROM {rows} WHERE NOT ({moved}))"
            f" TO '{target / relative}' (FORMAT {fmt})"
        )
        if conditions:
            connection.execute(
                f"COPY (SELECT * FROM {rows} WHERE ({moved}) AND NOT ({late}))"
                f" TO '{batch / (table.name + table.file.suffix)}' (FORMAT {fmt})"
            )
    where = f" AND ({target_stage.where})" if target_stage.where else ""
    connection.execute(
        f"COPY (SELECT CAST({quote(target_stage.user)} AS VARCHAR) AS user_key,"
        f" CAST({quote(target_stage.item)} AS VARCHAR) AS item_key FROM {read(stage_table.file)}"
        f" WHERE CAST({quote(target_stage.item)} AS VARCHAR) IN"
        f" (SELECT k FROM {moved_keys[item.name]})"
        f" AND {late_sql}{where})"
        f" TO '{work / HELD_OUT}' (FORMAT PARQUET)"
    )
    connection.close()


if __name__ == "__main__":
    sys.exit(main())
