"""Shared by the benchmark scripts: run one step in a fresh process, so that its peak memory is its
own, and write results where the README points."""

from __future__ import annotations

import json
import multiprocessing
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
Step = Callable[[str, str], dict[str, Any]]


def _timed(step: Step, folder: str, database: str, queue: Any) -> None:
    started = time.perf_counter()
    result = step(folder, database)
    result["wall_s"] = round(time.perf_counter() - started, 2)
    result["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    queue.put(result)


def measure(step: Step, folder: Path, database: Path) -> dict[str, Any]:
    """`step(folder, database)` in a spawned child, with its wall time and peak RSS added."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_timed, args=(step, str(folder), str(database), queue))
    process.start()
    result: dict[str, Any] = queue.get()
    process.join()
    return result


def write_results(name: str, results: dict[str, Any]) -> None:
    print(json.dumps(results, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2))
