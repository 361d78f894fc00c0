"""Seeds per second: our temporal sampler against PyG's NeighborLoader, same graph, seeds and fanouts.

    .venv/bin/python benchmarks/bench_sampler.py                      # ours only (PyG says why not)
    .venv/bin/python benchmarks/bench_sampler.py --pyg-python /tmp/venv-sparse/bin/python

PyG's loaders need pyg-lib or torch-sparse, neither of which the project installs. Ours is timed in
this process; PyG too where it can run here, otherwise the reason is recorded. With
``--pyg-python`` (an interpreter whose environment has torch-sparse, the same torch and numpy) the
graph is saved once and a child process in that interpreter times PyG on the same graph, seeds and
fanouts. (The child does not import ``hier_pipeline``: the package pulls in duckdb, pandas and
transformers, which that environment need not have.) PyG is asked for temporal sampling first
(``time_attr="time"``); where that fails, the reason is recorded and the non-temporal loader is
timed instead, which checks no times and shares nodes across the batch: less work than ours.
Torch runs on one thread by default: both samplers are single-threaded, and extra OpenMP threads only
add noise on a shared 2-core machine. ``load`` in the JSON is the 1-minute load average.

The graph is shaped like a grocery dataset: users -> transactions -> items, both directions, with
Zipf-like user activity and item popularity and item times at their first sale.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import HeteroData

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
ALWAYS = torch.iinfo(torch.int64).min
HOUSEHOLD = ("transactions", "household", "users")
PRODUCT = ("transactions", "product", "items")
CASES = [("users", (10, 5)), ("items", (10, 5)), ("users", (10, 5, 5)), ("items", (10, 5, 5))]


def grocery_graph(users: int, items: int, events: int, seed: int = 0) -> HeteroData:
    """Random temporal heterograph: each event is one transaction row with a user and an item."""
    rng = np.random.default_rng(seed)
    start, span = 1_600_000_000, 2 * 365 * 86_400
    event_time = np.sort(rng.integers(start, start + span, events))
    buyer = np.minimum(rng.zipf(1.3, events) - 1, users - 1)
    product = np.minimum(rng.zipf(1.2, events) - 1, items - 1)
    buyer, product = rng.permutation(users)[buyer], rng.permutation(items)[product]
    first_sale = np.full(items, start + span, dtype=np.int64)
    np.minimum.at(first_sale, product, event_time)
    data = HeteroData()
    data["users"].num_nodes, data["users"].time = users, torch.full((users,), ALWAYS)
    data["items"].num_nodes, data["items"].time = items, torch.from_numpy(first_sale)
    data["transactions"].num_nodes = events
    data["transactions"].time = torch.from_numpy(event_time)
    rows = torch.arange(events)
    for edge_type, target in ((HOUSEHOLD, buyer), (PRODUCT, product)):
        src, rel, dst = edge_type
        forward = torch.stack([rows, torch.from_numpy(target)])
        data[edge_type].edge_index, data[edge_type].edge_time = forward, data[src].time
        data[dst, f"rev_{rel}", src].edge_index = forward.flip(0)
        data[dst, f"rev_{rel}", src].edge_time = data[src].time
    return data


def seed_batches(
    data: HeteroData, seed_type: str, batch_size: int, batches: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Seeds drawn like training examples: the user or item of a random event in the last quarter,
    at that event's time (so active users and popular items are seeds more often)."""
    rng = np.random.default_rng(1)
    edge_type = {"users": HOUSEHOLD, "items": PRODUCT}[seed_type]
    event_time = data["transactions"].time.numpy()
    recent = np.flatnonzero(event_time >= np.quantile(event_time, 0.75))
    target = data[edge_type].edge_index[1].numpy()
    events = [rng.choice(recent, batch_size) for _ in range(batches + 1)]
    return [(torch.from_numpy(target[e]), torch.from_numpy(event_time[e])) for e in events]


def _rate(run: Callable[[torch.Tensor, torch.Tensor], int], batches: list[Any]) -> dict[str, float]:
    """Seeds/s over all batches but the first (warm-up), and mean sampled nodes per seed."""
    run(*batches[0])
    nodes, started = 0, time.perf_counter()
    for seeds, seed_time in batches[1:]:
        nodes += run(seeds, seed_time)
    seconds = time.perf_counter() - started
    total = sum(len(seeds) for seeds, _ in batches[1:])
    return {"seeds_per_s": round(total / seconds, 1), "nodes_per_seed": round(nodes / total, 2)}


def _ours(
    data: HeteroData, seed_type: str, fanouts: tuple[int, ...], work: list[Any]
) -> dict[str, Any]:
    """Our sampler: sample() alone, and sample() + to_hetero_data() (the full mini-batch)."""
    from hier_pipeline.graph.sampler import SamplerConfig, TemporalNeighborSampler

    started = time.perf_counter()
    sampler = TemporalNeighborSampler(data, SamplerConfig(fanouts=fanouts))
    setup = time.perf_counter() - started

    def sample(seeds: torch.Tensor, t: torch.Tensor) -> int:
        return sum(len(v) for v in sampler.sample(seed_type, seeds, t).n_id.values())

    def batch(seeds: torch.Tensor, t: torch.Tensor) -> int:
        return int(sampler.sample(seed_type, seeds, t).to_hetero_data(data).num_nodes)

    return _row(seed_type, fanouts, setup, _rate(sample, work), _rate(batch, work))


def _pyg(
    data: HeteroData, seed_type: str, fanouts: tuple[int, ...], work: list[Any], temporal: bool
) -> dict[str, Any]:
    """PyG's NeighborLoader: its sampler alone, and sampler + filter_fn (the full mini-batch).

    Our batches go to the loader's sampler and filter the way its ``collate_fn`` sends its own
    (``input_id`` gives ``filter_fn`` the batch size), so both samplers see the same seeds and
    times; the loader's own input list is never iterated. Raises what PyG raises when it cannot
    sample (no backend, or no temporal support).
    """
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.sampler import NodeSamplerInput

    started = time.perf_counter()
    nodes = torch.arange(data[seed_type].num_nodes)
    extra: dict[str, Any] = {"time_attr": "time", "input_time": nodes} if temporal else {}
    loader = NeighborLoader(data, list(fanouts), input_nodes=(seed_type, nodes), **extra)
    setup = time.perf_counter() - started

    def sampled(seeds: torch.Tensor, t: torch.Tensor) -> Any:
        inputs = NodeSamplerInput(
            torch.arange(len(seeds)), seeds, t if temporal else None, seed_type
        )
        return loader.node_sampler.sample_from_nodes(inputs)

    def sample(seeds: torch.Tensor, t: torch.Tensor) -> int:
        return sum(len(v) for v in sampled(seeds, t).node.values())

    def batch(seeds: torch.Tensor, t: torch.Tensor) -> int:
        return int(loader.filter_fn(sampled(seeds, t)).num_nodes)

    row = _row(seed_type, fanouts, setup, _rate(sample, work), _rate(batch, work))
    return row | {"temporal": temporal}


def _row(
    seed_type: str,
    fanouts: tuple[int, ...],
    setup: float,
    sample: dict[str, float],
    batch: dict[str, float],
) -> dict[str, Any]:
    return (
        {"case": f"{seed_type} {list(fanouts)}", "setup_s": round(setup, 2)}
        | {f"sample_{k}": v for k, v in sample.items()}
        | {f"batch_{k}": v for k, v in batch.items()}
    )


def time_pyg(data: HeteroData, batch_size: int, batches: int) -> dict[str, Any]:
    """PyG on every case: temporal where it can, otherwise non-temporal, with the reasons why not."""
    notes: list[str] = []
    results = []
    for seed_type, fanouts in CASES:
        work = seed_batches(data, seed_type, batch_size, batches)
        for temporal in (True, False):
            try:
                results.append(_pyg(data, seed_type, fanouts, work, temporal))
                break
            except Exception as error:  # PyG raises ImportError, ValueError or RuntimeError here
                kind = "temporal" if temporal else "non-temporal"
                reason = f"{kind}: {type(error).__name__}: {error}"
                if reason not in notes:
                    notes.append(reason)
    return {"available": bool(results), "notes": notes, "results": results}


def _environment() -> dict[str, Any]:
    return {"python": sys.executable, "torch": torch.__version__, "load": os.getloadavg()[0]}


def _in_child(python: str, data: HeteroData, options: list[str]) -> dict[str, Any]:
    """``time_pyg`` in another interpreter (one with torch-sparse) on this exact graph."""
    with tempfile.TemporaryDirectory() as folder:
        graph = Path(folder) / "graph.pt"
        torch.save(data.to_dict(), graph)
        command = [python, __file__, "--pyg-worker", str(graph), *options]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{python} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _table(report: dict[str, Any]) -> str:
    ours, pyg = report["ours"]["results"], report["pyg"]["results"]
    lines = [
        f"{'case':<20}{'sampler':<22}{'sample seeds/s':>16}{'batch seeds/s':>15}{'nodes/seed':>12}"
    ]
    for row in ours + pyg:
        kind = (
            "pyg " + ("temporal" if row["temporal"] else "non-temporal")
            if "temporal" in row
            else "ours (temporal)"
        )
        lines.append(
            f"{row['case']:<20}{kind:<22}{row['sample_seeds_per_s']:>16,.0f}"
            f"{row['batch_seeds_per_s']:>15,.0f}{row['sample_nodes_per_seed']:>12}"
        )
    for mine, theirs in zip(ours, pyg, strict=False):
        lines.append(
            f"{mine['case']:<20}{'ratio ours / pyg':<22}"
            f"{mine['sample_seeds_per_s'] / theirs['sample_seeds_per_s']:>16.2f}"
            f"{mine['batch_seeds_per_s'] / theirs['batch_seeds_per_s']:>15.2f}"
        )
    lines += [f"PyG ({report['pyg']['python']}): {note}" for note in report["pyg"]["notes"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyg-python", help="interpreter whose environment has torch-sparse")
    parser.add_argument("--users", type=int, default=2_500)
    parser.add_argument("--items", type=int, default=90_000)
    parser.add_argument("--events", type=int, default=1_500_000)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (both samplers are single-threaded)"
    )
    parser.add_argument("--pyg-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.pyg_worker:
        data = HeteroData.from_dict(torch.load(args.pyg_worker, weights_only=True))
        print(json.dumps(_environment() | time_pyg(data, args.batch_size, args.batches)))
        return
    data = grocery_graph(args.users, args.items, args.events)
    report: dict[str, Any] = {
        "graph": {"users": args.users, "items": args.items, "events": args.events},
        "batch_size": args.batch_size,
        "batches": args.batches,
        "threads": args.threads,
    }
    report["ours"] = _environment() | {
        "results": [
            _ours(
                data,
                seed_type,
                fanouts,
                seed_batches(data, seed_type, args.batch_size, args.batches),
            )
            for seed_type, fanouts in CASES
        ]
    }
    if args.pyg_python:
        options = ["--batch-size", str(args.batch_size), "--batches", str(args.batches)]
        report["pyg"] = _in_child(args.pyg_python, data, [*options, "--threads", str(args.threads)])
    else:
        report["pyg"] = _environment() | time_pyg(data, args.batch_size, args.batches)
    print(
        f"{args.events:,} events, batches of {args.batch_size} seeds, {args.threads} torch thread(s)"
    )
    print(_table(report))
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"sampler_{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
