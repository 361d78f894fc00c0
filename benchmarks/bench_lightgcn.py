"""LightGCN's training step: PyG's message passing against `propagate`, in one process.

    .venv/bin/python benchmarks/bench_lightgcn.py [DATASET_DIR] [--work DIR] [--steps 20]
        [--layers 2] [--threads 1]

Defaults to the synthetic world at scale 1. The graph is the `all` profile's confidence before
t1 of the default split (every stage: the most pairs a LightGCN grid fits); each form runs the
same seeded BPR steps, and the script prints the seconds per step of each, their ratio and the
largest difference between the two forms' final embeddings (they compute the same function).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness import write_results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", nargs="?", type=Path)
    parser.add_argument("--work", type=Path, help="keep the database and content cache here")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-lightgcn-") as scratch:
        return run(arguments, arguments.work or Path(scratch))


def run(arguments: argparse.Namespace, work: Path) -> int:
    import torch
    from torch import Tensor
    from torch_geometric.nn.models import LightGCN

    from hier_pipeline.evaluation.baselines.interactions import Interactions
    from hier_pipeline.evaluation.baselines.lightgcn import (
        normalised_edges,
        propagate,
        symmetric_adjacency,
    )
    from hier_pipeline.evaluation.baselines.profiles import profile_of
    from hier_pipeline.pipeline.prepare import prepare
    from hier_pipeline.synthetic import SyntheticConfig, generate_world

    torch.set_num_threads(arguments.threads)
    work.mkdir(parents=True, exist_ok=True)
    folder = arguments.dataset or generate_world(work / "world", SyntheticConfig(scale=1.0))
    prepared = prepare(folder, work, work / "content_cache")
    history = Interactions.from_graph(prepared.graph, prepared.split.t1)
    pairs = history.with_profile(profile_of({"profile": "all"})).confidence()
    positive = pairs.value > 0
    user, item = pairs.user[positive], pairs.item[positive] + history.num_users
    weight, num_nodes = pairs.value[positive], history.num_users + history.num_items
    edge_index, edge_weight = normalised_edges(user, item, weight, num_nodes)
    adjacency = symmetric_adjacency(user, item, weight, num_nodes)

    def train(embed: Callable[[LightGCN], Tensor]) -> tuple[float, Tensor]:
        torch.manual_seed(0)
        generator = torch.Generator().manual_seed(0)
        model = LightGCN(num_nodes, 64, arguments.layers, normalize=False)
        optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
        started = time.perf_counter()
        for _ in range(arguments.steps):
            batch = torch.randint(len(user), (2048,), generator=generator)
            negative = torch.randint(history.num_users, num_nodes, (2048,), generator=generator)
            embedding = embed(model)
            anchor = embedding[user[batch]]
            loss = model.recommendation_loss(
                (anchor * embedding[item[batch]]).sum(-1),
                (anchor * embedding[negative]).sum(-1),
                node_id=torch.cat([user[batch], item[batch], negative]),
                lambda_reg=1e-4,
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        seconds = (time.perf_counter() - started) / arguments.steps
        with torch.no_grad():
            return seconds, embed(model)

    message_passing, before = train(lambda model: model.get_embedding(edge_index, edge_weight))
    sparse_product, after = train(lambda model: propagate(model, adjacency))
    results = {
        "dataset": str(arguments.dataset or "synthetic scale 1"),
        "pairs": len(user),
        "nodes": num_nodes,
        "layers": arguments.layers,
        "threads": arguments.threads,
        "steps": arguments.steps,
        "seconds_per_step": {"message_passing": message_passing, "propagate": sparse_product},
        "speedup": message_passing / sparse_product,
        "max_embedding_difference": float((before - after).abs().max()),
    }
    print(
        f"{len(user):,} pairs, {arguments.layers} layers, {arguments.threads} thread(s): "
        f"message passing {message_passing:.3f} s/step, propagate {sparse_product:.3f} s/step "
        f"({results['speedup']:.1f}x); embeddings differ by at most "
        f"{results['max_embedding_difference']:.1e}"
    )
    write_results(f"lightgcn-{Path(results['dataset']).name.replace(' ', '_')}", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
