"""Shared by the benchmark scripts: run one step in a fresh process, so that its peak memory and
CPU time are its own, and write results where the README points."""

from __future__ import annotations

import json
import multiprocessing
import queue as queues
import resource
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


def measure(step: Step, folder: Path, database: Path, threads: int | None = None) -> dict[str, Any]:
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
