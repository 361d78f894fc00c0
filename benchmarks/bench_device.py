"""Training steps and a validation of the interest model on every device this machine has: the CPU
always, the GPU in float32 and with bfloat16 autocast where CUDA is; one config, one process, each
figure against the CPU's.

    .venv/bin/python benchmarks/bench_device.py [DATASET_DIR] [--work DIR] [--steps 30]
        [--batch-sizes 128,1024] [--threads N] [--prepared DIR]

Each setting trains one epoch of `--steps` steps from the same seed (`train_model`, validation
included) and reports seconds per step, examples per second, the validation's seconds, the
epoch's loss and validation MAP@10 (the same examples and neighbourhoods on every device, so the
losses must agree up to rounding), and the GPU's peak memory. `--prepared` reads `graph.pt` and
`content.pt` from a folder `hier evaluate` wrote (OUT/work) instead of preparing DATASET_DIR.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness import dataset_parser, run_prepared, write_results


def settings(cuda: bool) -> list[tuple[str, bool]]:
    """(device, amp) pairs to time: the CPU first, the reference of every ratio."""
    return [("cpu", False), *([("cuda", False), ("cuda", True)] if cuda else [])]


def main() -> int:
    parser = dataset_parser(__doc__)
    parser.add_argument("--steps", type=int, default=30, help="training steps per setting")
    parser.add_argument("--batch-sizes", default="128", help="comma-separated batch sizes")
    parser.add_argument("--threads", type=int, help="torch's CPU threads (default: torch's)")
    parser.add_argument("--prepared", type=Path, help="folder with graph.pt and content.pt")
    arguments = parser.parse_args()
    if arguments.threads is not None:
        import torch

        torch.set_num_threads(arguments.threads)
    if arguments.prepared is not None:
        return run(arguments, load_prepared(arguments.prepared))
    return run_prepared(arguments, run)


def load_prepared(folder: Path) -> Any:
    import torch

    from hier_pipeline.graph import default_split
    from hier_pipeline.graph.store import load_graph

    graph = load_graph(folder / "graph.pt")
    content = torch.load(folder / "content.pt", weights_only=True)
    return SimpleNamespace(graph=graph, content=content, split=default_split(graph))


def run(arguments: argparse.Namespace, prepared: Any) -> int:
    import torch

    from hier_pipeline.model.train import train_model
    from hier_pipeline.model.train_config import TrainConfig

    base = TrainConfig(epochs=1, steps_per_epoch=arguments.steps, patience=1)
    rows: list[dict[str, Any]] = []
    for batch_size in (int(size) for size in arguments.batch_sizes.split(",")):
        reference = None
        for device, amp in settings(torch.cuda.is_available()):
            config = replace(base, batch_size=batch_size, device=device, amp=amp)
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            started = time.perf_counter()
            trained = train_model(prepared.graph, prepared.content, prepared.split, config)
            record = trained.history[0]
            row = {
                "device": device,
                "amp": amp,
                "batch_size": batch_size,
                "steps": arguments.steps,
                "seconds_per_step": record["time/epoch_seconds"] / arguments.steps,
                "examples_per_second": record["throughput/examples_per_second"],
                "validation_seconds": record["time/validation_seconds"],
                "total_seconds": time.perf_counter() - started,
                "loss": record["loss/total"],
                "val_map@10": record["val/map@10"],
                "gpu_peak_gb": torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else 0,
            }
            reference = reference or row
            row["step_speedup"] = reference["seconds_per_step"] / row["seconds_per_step"]
            row["validation_speedup"] = reference["validation_seconds"] / row["validation_seconds"]
            print(row, flush=True)
            rows.append(row)
    print("| device | amp | batch | s/step | x CPU | validation s | x CPU | loss | val MAP@10 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['device']} | {row['amp']} | {row['batch_size']} "
            f"| {row['seconds_per_step']:.3f} | {row['step_speedup']:.1f} "
            f"| {row['validation_seconds']:.1f} | {row['validation_speedup']:.1f} "
            f"| {row['loss']:.4f} | {row['val_map@10']:.4f} |"
        )
    dataset = str(arguments.prepared or arguments.dataset or "synthetic scale 1")
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu only"
    write_results(
        "device",
        {"dataset": dataset, "gpu": device, "threads": torch.get_num_threads(), "rows": rows},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
