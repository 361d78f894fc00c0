"""Baselines on one split, one candidate set and one protocol, each tuned with the same effort.

    .venv/bin/python benchmarks/bench_baselines.py [DATASET_DIR] [--work DIR] [--names a,b]
        [--max-users 1000] [--steps 1000] [--seconds S] [--halving 3,3] [--ease-max-items 10000]
        [--seed 0] [--threads 1] [--workers 1]

Defaults to the synthetic world at scale 1 (generated into the work folder). Prints a markdown
table of the target (deepest) stage's full-ranking metrics on [t2, end) of the dataset's default
split for warm users (the window and protocol of `evaluation_report`, `evaluate_models`), the
cold-item recall, the setting tuning chose and the wall and CPU seconds each baseline took
(tuning included; CPU seconds over all threads and workers, the steadier figure on a shared machine);
the protocol is `hier_pipeline.evaluation.baselines.evaluate`'s module doc. `--work` keeps the
DuckDB file and the content cache between runs.
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
from pathlib import Path
from typing import Any

from harness import dataset_parser, run_prepared, write_results


def main() -> int:
    parser = dataset_parser(__doc__)
    parser.add_argument("--names", help="comma-separated baselines (default: all)")
    parser.add_argument("--max-users", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=1000, help="per fit of a trained baseline")
    parser.add_argument(
        "--seconds", type=float, help="wall-clock cap per trained fit (default none: reproducible)"
    )
    parser.add_argument(
        "--halving",
        default="3,3",
        help="keep,rungs of the trained grids' successive halving (1,1: every setting at --steps)",
    )
    parser.add_argument("--ease-max-items", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1: no OpenMP contention)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="baselines side by side in forked one-thread processes (1: in this process)",
    )
    arguments = parser.parse_args()
    import torch

    torch.set_num_threads(arguments.threads)
    return run_prepared(arguments, run)


def run(arguments: argparse.Namespace, prepared: Any) -> int:
    from hier_pipeline.evaluation.baselines import BASELINES, FitBudget, Halving, evaluate_baselines
    from hier_pipeline.evaluation.compare import data_end
    from hier_pipeline.graph.split import TemporalSplit

    names = arguments.names.split(",") if arguments.names else list(BASELINES)
    split = TemporalSplit(prepared.split.t2, data_end(prepared.graph))
    # CPU seconds of every thread, and of the workers once they end: steadier than wall on a
    # busy box. A progress line names its baseline first ("name: ...") as each one ends.
    cpu: dict[str, float] = {}
    cpu_mark = [_cpu_seconds()]

    def progress(line: str) -> None:
        cpu[line.split(":")[0]] = _cpu_seconds() - cpu_mark[0]
        cpu_mark[0] = _cpu_seconds()
        print(line, flush=True)

    wall_started = time.perf_counter()
    result = evaluate_baselines(
        prepared.graph,
        prepared.content,
        split,
        names,
        max_users=arguments.max_users,
        seed=arguments.seed,
        budget=FitBudget(arguments.steps, arguments.seconds),
        ease_max_items=arguments.ease_max_items,
        progress=progress,
        halving=Halving(*map(int, arguments.halving.split(","))),
        workers=arguments.workers,
    )
    wall = time.perf_counter() - wall_started
    metrics = list(next(iter(result.metrics.values())))
    print(
        f"\nrepeat rate {result.repeat_rate:.3f} -> seen items "
        f"{'excluded' if result.exclude_seen else 'kept'}; {result.num_users} warm users, "
        f"{result.num_cold_users} with cold items\n"
    )
    print(f"| baseline | {' | '.join(metrics)} | setting | seconds | CPU seconds |")
    print(f"|---|{'---:|' * len(metrics)}---|---:|---:|")
    for name, row in result.metrics.items():
        cells = " | ".join("-" if math.isnan(row[m]) else f"{row[m]:.4f}" for m in metrics)
        setting = ", ".join(f"{k}={v}" for k, v in result.settings[name].items())
        print(f"| {name} | {cells} | {setting} | {result.seconds[name]:.0f} | {cpu[name]:.0f} |")
    print(f"\nall baselines: {wall:.0f} s wall, {sum(cpu.values()):.0f} CPU s")
    dataset = str(arguments.dataset or "synthetic scale 1")
    results = {
        "dataset": dataset,
        "target_stage": prepared.graph.metadata.stages[-1],
        "split": {"t1": split.t1, "t2": split.t2},
        "repeat_rate": result.repeat_rate,
        "exclude_seen": result.exclude_seen,
        "num_users": result.num_users,
        "num_cold_users": result.num_cold_users,
        "budget": {"steps": arguments.steps, "seconds": arguments.seconds},
        "halving": arguments.halving,
        "threads": arguments.threads,
        "workers": arguments.workers,
        "seconds": wall,
        "cpu_seconds": sum(cpu.values()),
        "rows": {
            name: {
                "metrics": result.metrics[name],
                "setting": result.settings[name],
                "tuning_map@10": [[s, v] for s, v in result.tuning[name].scores],
                "seconds": result.seconds[name],
                "cpu_seconds": cpu[name],
            }
            for name in result.metrics
        },
    }
    write_results(f"baselines-{Path(dataset).name.replace(' ', '_')}", results)
    return 0


def _cpu_seconds() -> float:
    """This process's CPU seconds and its ended workers' (`--workers`)."""
    own, workers = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


if __name__ == "__main__":
    sys.exit(main())
