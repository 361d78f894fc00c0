"""Every stage of the pipeline on the synthetic world at several scale factors (and on Complete
Journey): wall time, CPU time, peak RSS and throughput per stage, their growth with events, and
the peers run on the same data in the same run (PyG HGTConv, PyG LightGCN, sentence-transformers).

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/bench_scale.py \
        [--scales 1,4,16] [--completejourney DIR] [--train-steps 20] [--max-images N] \
        [--work /tmp/bench_scale] [--out benchmarks/results] [--add]

Each stage runs in a fresh process (`harness.measure`) reading what the stage before it wrote to
the work folder, with a fresh content cache per dataset. Training runs a fixed number of steps:
its throughput is training edges/s, not time to converge. `--max-images` embeds only that many
images where a dataset has more and extrapolates the time (the later stages then train on text
vectors only). Writes scale.json and scale.md to `--out` and prints the markdown. `--add` keeps
the runs already in `--out`'s scale.json for datasets not measured now, e.g. Complete Journey run
on its own beside the synthetic scales; every run records its own date and commit.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import scale_stages as stages
from harness import RESULTS, Step, measure, write_results
from scale_table import markdown, peer_ratios, slopes

from hier_pipeline.model.train_config import TrainConfig


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default="1,4,16", help="comma-separated scale factors")
    parser.add_argument("--completejourney", type=Path, help="Complete Journey's folder")
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--max-images", type=int, help="embed at most this many images")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per stage")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench_scale")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--add", action="store_true", help="keep the other datasets' runs")
    arguments = parser.parse_args()
    datasets: dict[str, tuple[Path, float | None]] = {
        f"synthetic x{float(s):g}": (arguments.work / f"x{float(s):g}" / "world", float(s))
        for s in arguments.scales.split(",")
        if s
    }
    if arguments.completejourney:
        datasets["completejourney"] = (arguments.completejourney.resolve(), None)
    results: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "commit": _commit(),
        "machine": _machine(arguments.threads),
        "train_steps": arguments.train_steps,
        "batch_size": TrainConfig().batch_size,
        "max_images": arguments.max_images,
        "runs": _earlier_runs(arguments.out) if arguments.add else {},
    }
    for name, (folder, scale) in datasets.items():
        work = arguments.work / name.replace(" ", "_") / "run"
        shutil.rmtree(work, ignore_errors=True)  # an empty content cache: everything embedded
        work.mkdir(parents=True)
        run = run_dataset(name, folder, work, scale, arguments)
        results["runs"][name] = run | {"date": results["date"], "commit": results["commit"]}
        results["slopes"] = slopes(results["runs"])
        results["peers"] = {n: peer_ratios(r) for n, r in results["runs"].items()}
        write_results("scale", results, arguments.out)  # after each dataset: a crash keeps them
    table = markdown(results)
    (arguments.out / "scale.md").write_text(table)
    print(table)
    return 0


def _earlier_runs(out: Path) -> dict[str, Any]:
    """The runs of `out/scale.json`, each stamped with its run's date and commit if it is not."""
    earlier = json.loads((out / "scale.json").read_text())
    stamp = {"date": earlier["date"], "commit": earlier["commit"]}
    runs: dict[str, Any] = {name: stamp | run for name, run in earlier["runs"].items()}
    return runs


def run_dataset(
    name: str, folder: Path, work: Path, scale: float | None, arguments: argparse.Namespace
) -> dict[str, Any]:
    """The stages in pipeline order, the peers after what they compare with. A stage that fails
    (its process killed for memory, say) ends this dataset's run; the error is kept."""
    steps: list[tuple[str, Step]] = (
        [] if scale is None else [("generate", partial(stages.generate, scale=scale))]
    )
    train = partial(stages.train, steps=arguments.train_steps)
    steps += [
        ("imports_only", stages.imports_only),
        ("load", stages.load),
        ("graph", stages.graph),
        ("texts", stages.texts),
        ("images", partial(stages.images, limit=arguments.max_images)),
        ("sample", stages.sample),
        ("train", partial(train, variant="full")),
        ("hgt", partial(train, variant="hgt")),
        ("infer", stages.infer),
        ("hierarchy", stages.hierarchy),
        ("tokens", stages.tokens),
        ("lightgcn", stages.lightgcn),
        ("text_peer", stages.text_peer),
    ]
    run: dict[str, Any] = {"dataset": str(folder), "scale": scale, "stages": {}}
    for stage, step in steps:
        try:
            row = measure(step, folder, work, threads=arguments.threads)
        except RuntimeError as error:
            run["error"] = f"{stage}: {error}"
            print(f"{name} {stage}: FAILED {error}", flush=True)
            break
        run["stages"][stage] = row | {"load_average": round(os.getloadavg()[0], 2)}
        print(
            f"{name} {stage}: {row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU, "
            f"{row['peak_rss_gb']:.2f} GB, {row['count']:,} in {row['work_s']:.1f} s",
            flush=True,
        )
    return run


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "unknown"


def _machine(threads: int) -> str:
    cores = sorted(os.sched_getaffinity(0))
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, this run pinned "
        f"to {len(cores)} ({cores}), torch {threads} thread(s), "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"
    )


if __name__ == "__main__":
    sys.exit(main())
