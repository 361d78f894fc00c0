"""Interest model quality and cost, with its ablations, against popularity on the same window.

    .venv/bin/python benchmarks/bench_model.py [DATASET_DIR] [--epochs 4] [--steps 40]

Defaults to the synthetic world at scale 1 (generated into a temporary folder). Every variant
trains with the same seed, data, split and budget; the table reports the best validation MAP@10
and recall@10 of the target stage (full ranking over all items) and the time per epoch.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from harness import write_results


def variants(base: object) -> dict[str, object]:
    from hier_pipeline.model.attention import AttentionConfig
    from hier_pipeline.model.train import TrainConfig

    assert isinstance(base, TrainConfig)
    no_biases = AttentionConfig.with_biases(False)
    return {
        "full model": base,
        "no attention biases": replace(base, model=replace(base.model, attention=no_biases)),
        "no global primitives": replace(base, model=replace(base.model, use_primitives=False)),
        "no distillation": replace(base, use_distillation=False),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", nargs="?", type=Path)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    arguments = parser.parse_args()

    from hier_pipeline.evaluation.baselines import popularity_metrics
    from hier_pipeline.evaluation.window import target_window
    from hier_pipeline.model.train import TrainConfig, train_model
    from hier_pipeline.pipeline import prepare
    from hier_pipeline.synthetic import SyntheticConfig, generate_world

    with tempfile.TemporaryDirectory(prefix="bench-model-") as scratch:
        folder = arguments.dataset or generate_world(
            Path(scratch) / "world", SyntheticConfig(scale=1.0)
        )
        prepared = prepare(folder, Path(scratch), Path(scratch) / "cache")
    base = TrainConfig(
        epochs=arguments.epochs, steps_per_epoch=arguments.steps, patience=arguments.epochs
    )
    split, graph = prepared.split, prepared.graph
    window = target_window(graph, split.t1, split.t2, base.max_eval_users, base.seed)
    rows: dict[str, dict[str, float]] = {
        "popularity": popularity_metrics(graph, window, split.t1, base.eval_k)
    }
    for name, config in variants(base).items():
        assert isinstance(config, TrainConfig)
        started = time.perf_counter()
        result = train_model(
            graph,
            prepared.content,
            split,
            config,
            progress=lambda line, n=name: print(f"{n}: {line}"),
        )
        best = result.history[result.best_epoch]
        rows[name] = {
            "map@10": best["val/map@10"],
            "recall@10": best["val/recall@10"],
            "seconds_per_epoch": sum(h["time/epoch_seconds"] for h in result.history)
            / len(result.history),
            "total_seconds": time.perf_counter() - started,
        }
    print("| variant | val MAP@10 | val recall@10 | s/epoch |\n|---|---:|---:|---:|")
    for name, row in rows.items():
        print(
            f"| {name} | {row['map@10']:.4f} | {row['recall@10']:.4f} | {row.get('seconds_per_epoch', 0):.1f} |"
        )
    write_results("model", {"dataset": str(arguments.dataset or "synthetic scale 1"), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
