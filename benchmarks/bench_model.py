"""Interest model quality and cost: its ablations and the PyG HGTConv peer, against popularity, on
one split, one candidate set and one training budget.

    .venv/bin/python benchmarks/bench_model.py [DATASET_DIR] [--minutes 20] [--epochs 4 --steps 40]
        [--variants full,hgt,no_bias,no_primitives,no_distill] [--work DIR] [--embeddings DIR]

Defaults to the synthetic world at scale 1 (generated into the work folder). With `--minutes`, every
variant gets the same wall-clock budget of optimisation steps (validation excluded) and stops when
it is spent; otherwise each runs `--epochs` x `--steps`. The table reports the best validation MAP@10
and recall@10 of the target (deepest) stage, full ranking over all items, and the time per step.
`--work` keeps the DuckDB file and the content cache between runs (text encoding dominates a first
Complete Journey run); `--embeddings` saves each variant's entity embeddings there, as of t1.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness import dataset_parser, run_prepared, write_results


def variants(base: Any) -> dict[str, Any]:
    from hier_pipeline.model.attention import AttentionConfig

    no_biases = AttentionConfig.with_biases(False)
    return {
        "full": base,
        "hgt": replace(
            base,
            model=replace(base.model, backbone="hgt", use_history_bias=False),
            use_distillation=False,
        ),
        "no_bias": replace(base, model=replace(base.model, attention=no_biases)),
        "no_primitives": replace(base, model=replace(base.model, use_primitives=False)),
        "no_distill": replace(base, use_distillation=False),
        "no_history": replace(base, model=replace(base.model, use_history_bias=False)),
        "no_logq": replace(base, logq_correction=False),
        "hgt_history": replace(
            base,
            model=replace(base.model, backbone="hgt"),
            use_distillation=False,
        ),
    }


def main() -> int:
    parser = dataset_parser(__doc__)
    parser.add_argument("--minutes", type=float, help="training budget per variant")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default="full,hgt,no_bias,no_primitives,no_distill")
    parser.add_argument("--embeddings", type=Path, help="save each variant's entity embeddings")
    arguments = parser.parse_args()
    return run_prepared(arguments, run)


def run(arguments: argparse.Namespace, prepared: Any) -> int:
    from hier_pipeline.evaluation.baselines import popularity_metrics
    from hier_pipeline.model.embeddings import embed_entities
    from hier_pipeline.model.train import train_model
    from hier_pipeline.model.train_config import TrainConfig
    from hier_pipeline.ranking.window import target_window

    budget = None if arguments.minutes is None else 60.0 * arguments.minutes
    epochs = 1000 if budget is not None else arguments.epochs  # the budget ends it
    base = TrainConfig(
        epochs=epochs,
        steps_per_epoch=arguments.steps,
        patience=epochs,
        seed=arguments.seed,
        time_budget_seconds=budget,
    )
    split, graph = prepared.split, prepared.graph
    window = target_window(graph, split.t1, split.t2, base.max_eval_users, base.seed)
    rows: dict[str, dict[str, float]] = {
        "popularity": popularity_metrics(graph, window, split.t1, base.eval_k)
    }
    chosen = arguments.variants.split(",")
    for name, config in variants(base).items():
        if name not in chosen:
            continue
        started = time.perf_counter()
        result = train_model(
            graph,
            prepared.content,
            split,
            config,
            progress=lambda line, n=name: print(f"{n}: {line}", flush=True),
        )
        best = result.history[result.best_epoch]
        train_seconds = sum(h["time/epoch_seconds"] for h in result.history)
        steps = (
            sum(
                h["throughput/examples_per_second"] * h["time/epoch_seconds"]
                for h in result.history
            )
            / config.batch_size
        )
        rows[name] = {
            "map@10": best["val/map@10"],
            "recall@10": best["val/recall@10"],
            "best_epoch": result.best_epoch + 1,
            "epochs": len(result.history),
            "steps": round(steps),
            "seconds_per_step": train_seconds / steps,
            "train_seconds": train_seconds,
            "total_seconds": time.perf_counter() - started,
        }
        if arguments.embeddings is not None:
            embed_entities(
                result.model,
                graph,
                prepared.content,
                arguments.embeddings / f"{name}-seed{arguments.seed}.pt",
                config.neighbourhoods(len(graph.metadata.stages)),
                as_of=split.t1,  # the validation window stays unseen by what is built on them
            )
    reference = rows.get("full", {}).get("seconds_per_step")
    print("| variant | val MAP@10 | val recall@10 | steps | s/step | s/step vs full |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        per_step = row.get("seconds_per_step")
        ratio = f"{per_step / reference:.2f}" if per_step and reference else "-"
        print(
            f"| {name} | {row['map@10']:.4f} | {row['recall@10']:.4f} | {row.get('steps', '-')} "
            f"| {f'{per_step:.2f}' if per_step else '-'} | {ratio} |"
        )
    dataset = str(arguments.dataset or "synthetic scale 1")
    results = {
        "dataset": dataset,
        "target_stage": graph.metadata.stages[-1],
        "split": {"t1": split.t1, "t2": split.t2},
        "budget_minutes": arguments.minutes,
        "rows": rows,
    }
    write_results(f"model-{Path(dataset).name.replace(' ', '_')}", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
