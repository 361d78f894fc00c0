"""Shared by the benchmark scripts: run one step in a fresh process, so that its peak memory and
CPU time are its own; prepare the dataset a benchmark runs on; write results where the README
points."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue as queues
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
Step = Callable[[str, str], dict[str, Any]]


def _cpu_seconds() -> float:
    """User + system time of this process, all its threads (DuckDB's and OpenMP's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(step: Step, folder: str, database: str, threads: int | None, queue: Any) -> None:
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    started, cpu = time.perf_counter(), _cpu_seconds()
    result = step(folder, database)
    result["wall_s"] = round(time.perf_counter() - started, 2)
    result["cpu_s"] = round(_cpu_seconds() - cpu, 2)
    result["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    queue.put(result)


def measure(
    step: Step, folder: Path | str, database: Path | str, threads: int | None = None
) -> dict[str, Any]:
    """`step(folder, database)` in a spawned child, with its wall time, CPU time and peak RSS
    added; `threads` sets torch's intra-op threads there first."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(
        target=_timed, args=(step, str(folder), str(database), threads, queue)
    )
    process.start()
    alive = True
    while True:  # a child killed (out of memory, say) never answers: stop waiting for it
        try:
            result: dict[str, Any] = queue.get(timeout=5)
            break
        except queues.Empty:
            if not alive:  # one more wait after it ended, for a result sent as it exited
                raise RuntimeError(f"{step} died with exit code {process.exitcode}") from None
            alive = process.is_alive()
    process.join()
    return result


def write_results(name: str, results: dict[str, Any], folder: Path = RESULTS) -> None:
    print(json.dumps(results, indent=2))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(results, indent=2))


def dataset_parser(doc: str) -> argparse.ArgumentParser:
    """A parser with the arguments of a benchmark on one dataset (`run_prepared`): DATASET_DIR
    (default: the synthetic world at scale 1) and --work; `doc`'s first line describes it."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("dataset", nargs="?", type=Path)
    parser.add_argument("--work", type=Path, help="keep the database and content cache here")
    return parser


def run_prepared(
    arguments: argparse.Namespace, run: Callable[[argparse.Namespace, Any], int]
) -> int:
    """`run(arguments, prepared)` on `arguments.dataset` prepared in `arguments.work` (default: a
    temporary folder; the synthetic world at scale 1 is generated there when no dataset is
    given). Prints how long preparing took: a first run encodes every text, a later one with
    the same --work reads the cache."""
    from hier_pipeline.pipeline.prepare import prepare
    from hier_pipeline.synthetic import SyntheticConfig, generate_world

    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        work = arguments.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        folder = arguments.dataset or generate_world(work / "world", SyntheticConfig(scale=1.0))
        started = time.perf_counter()
        prepared = prepare(folder, work, work / "content_cache")
        print(f"prepared in {time.perf_counter() - started:.0f} s", flush=True)
        return run(arguments, prepared)
