"""LightGCN's training step: PyG's message passing and autograd over sparse products against
`propagate`, in one process.

    .venv/bin/python benchmarks/bench_lightgcn.py [DATASET_DIR] [--work DIR] [--steps 20]
        [--layers 2] [--threads 1]

Defaults to the synthetic world at scale 1. The graph is the `all` profile's confidence before
t1 of the default split (every stage: the most pairs a LightGCN grid fits); each form runs the
same seeded BPR steps, and the script prints the seconds per step of each, their ratios and the
largest difference between the forms' final embeddings (they compute the same function).
"Autograd" is the layer-weighted sum of one sparse product per layer (each product's backward
the same product, by symmetry), the rest left to autograd: what `propagate` did before its
whole backward was written out.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import dataset_parser, run_prepared, write_results


def main() -> int:
    parser = dataset_parser(__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args()
    import torch

    torch.set_num_threads(arguments.threads)
    return run_prepared(arguments, run)


def run(arguments: argparse.Namespace, prepared: Any) -> int:
    import torch
    from torch import Tensor
    from torch_geometric.nn.models import LightGCN

    from hier_pipeline.evaluation.baselines.interactions import Interactions
    from hier_pipeline.evaluation.baselines.lightgcn import (
        bpr_step,
        normalised_edges,
        propagate,
        symmetric_adjacency,
    )
    from hier_pipeline.evaluation.baselines.profiles import profile_of

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
            bpr_step(model, optimizer, embed(model), user[batch], item[batch], negative, 1e-4)
        seconds = (time.perf_counter() - started) / arguments.steps
        with torch.no_grad():
            return seconds, embed(model)

    class SymmetricProduct(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor) -> Tensor:
            return adjacency @ x

        @staticmethod
        def backward(ctx: Any, grad: Tensor) -> Tensor:
            return adjacency @ grad

    def autograd_sum(model: LightGCN) -> Tensor:
        x, out = model.embedding.weight, model.embedding.weight * model.alpha[0]
        for layer in range(model.num_layers):
            x = SymmetricProduct.apply(x)
            out = out + x * model.alpha[layer + 1]
        return out

    message_passing, before = train(lambda model: model.get_embedding(edge_index, edge_weight))
    autograd, by_autograd = train(autograd_sum)
    sparse_product, after = train(lambda model: propagate(model, adjacency))
    results = {
        "dataset": str(arguments.dataset or "synthetic scale 1"),
        "pairs": len(user),
        "nodes": num_nodes,
        "layers": arguments.layers,
        "threads": arguments.threads,
        "steps": arguments.steps,
        "seconds_per_step": {
            "message_passing": message_passing,
            "autograd": autograd,
            "propagate": sparse_product,
        },
        "speedup": message_passing / sparse_product,
        "speedup_over_autograd": autograd / sparse_product,
        "max_embedding_difference": max(
            float((before - after).abs().max()), float((by_autograd - after).abs().max())
        ),
    }
    print(
        f"{len(user):,} pairs, {arguments.layers} layers, {arguments.threads} thread(s): "
        f"message passing {message_passing:.3f} s/step, autograd {autograd:.3f}, propagate "
        f"{sparse_product:.3f} ({results['speedup']:.1f}x, "
        f"{results['speedup_over_autograd']:.2f}x); embeddings differ by at most "
        f"{results['max_embedding_difference']:.1e}"
    )
    write_results(f"lightgcn-{Path(results['dataset']).name.replace(' ', '_')}", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
