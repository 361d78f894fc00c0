"""Interest hierarchy and tokens on materialised pipeline outputs: agreement with a truth table,
token vs embedding retrieval, super-graph density, stability across seeds, query latency.

    .venv/bin/python benchmarks/bench_interests.py [--home .hier] [--name synthetic_ads]
        [--dataset-dir DIR] [--truth TRUTH.parquet] [--seeds 0 1] [--as-of end]
        [--embeddings FILE] [--other-training-seed FILE]

Reads the graph, warehouse, content, model and embeddings that `make demo` wrote under the home.
By default every entity is re-embedded with the trained model as of t1, so that the validation
window [t1, t2) is unseen by the embeddings the tree and the tokens come from (`--as-of end` uses
the materialised embeddings, inferred as of the end of the data, which see that window;
`--embeddings FILE` uses a saved file instead, e.g. `bench_model.py --embeddings`, as of t1).
`--other-training-seed FILE`: the same entities embedded by a model trained with another seed;
the tree is grown on both and compared level by level (ARI: token stability across training).

Agreement: NMI/ARI per level against a truth table whose first column is the item key and whose
`*_id` columns are levels coarse -> fine (default: the synthetic world's truth/products.parquet),
next to the tree grown at the truth's sizes (what the size rule costs), the same clusters
shuffled (chance), a flat k-means per level at the same sizes (what nesting costs) and the
model's own primitives (the alternative the design names).
Retrieval: Recall@50 of the target stage in the validation window, full ranking over all items,
by embedding inner product and by shared tokens (`InvertedIndex`), with popularity for scale.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness import write_results

K = 50


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, help="pipeline outputs (default: $HIER_HOME or .hier)")
    parser.add_argument("--name", help="dataset name (default: the only graph under the home)")
    parser.add_argument("--dataset-dir", type=Path, help="the dataset folder (default: synthetic)")
    parser.add_argument("--truth", type=Path, help="truth table (default: DATASET_DIR/truth/...)")
    parser.add_argument("--seeds", type=int, nargs=2, default=(0, 1))
    parser.add_argument("--as-of", choices=["t1", "end"], default="t1")
    parser.add_argument("--embeddings", type=Path, help="embeddings file to use instead")
    parser.add_argument(
        "--other-training-seed", type=Path, help="embeddings of a model trained with another seed"
    )
    arguments = parser.parse_args()

    import pandas as pd

    from hier_pipeline.dataset import parse_dataset
    from hier_pipeline.files.home import default_home
    from hier_pipeline.graph import default_split, load_graph
    from hier_pipeline.interests.hierarchy import HierarchyConfig
    from hier_pipeline.model.embeddings import EmbeddingArtifact

    home = (arguments.home or default_home()).resolve()
    name = arguments.name or _only(p.stem for p in (home / "graphs").glob("*.pt"))
    folder = arguments.dataset_dir or _only((home / "datasets").glob("synthetic_*"))
    spec = parse_dataset(folder)
    database = home / "warehouse" / f"{name}.duckdb"
    graph = load_graph(home / "graphs" / f"{name}.pt")
    split = default_split(graph)
    truth_path = arguments.truth or folder / "truth" / "products.parquet"
    truth = pd.read_parquet(truth_path) if truth_path.is_file() else None
    results: dict[str, Any] = {"dataset": name, "home": str(home), "as_of": arguments.as_of}
    with tempfile.TemporaryDirectory(prefix="bench-interests-") as scratch:
        embeddings = EmbeddingArtifact(home / "embeddings" / f"{name}.pt", 0, {})
        if arguments.embeddings is not None:
            embeddings = EmbeddingArtifact(arguments.embeddings, 0, {})
        elif arguments.as_of == "t1":
            embeddings = _embed_as_of(home, name, graph, split.t1, Path(scratch) / "t1.pt")
        configs = [HierarchyConfig(seed=seed) for seed in arguments.seeds]
        results["hierarchy"], tree = _hierarchy(embeddings, graph, spec, database, truth, configs)
        if arguments.other_training_seed is not None:
            results["training_seed_stability"] = _training_stability(
                embeddings,
                EmbeddingArtifact(arguments.other_training_seed, 0, {}),
                graph,
                configs[0],
            )
        results["retrieval"] = _retrieval(embeddings, graph, split, tree)
        results["latency_ms"] = _latency(embeddings, graph, spec, database, configs[0], scratch)
    _print(results)
    write_results("interests", results)
    return 0


def _only(candidates: Any) -> Any:
    found = sorted(candidates)
    if len(found) != 1:
        raise SystemExit(f"expected one candidate, found {found}: say which with an option")
    return found[0]


def _embed_as_of(home: Path, name: str, graph: Any, as_of: int, path: Path) -> Any:
    """Every entity embedded by the materialised model from its neighbourhood before `as_of`."""
    from hier_pipeline.content.tables import ContentArtifact
    from hier_pipeline.model.artifact import ModelArtifact
    from hier_pipeline.model.embeddings import embed_entities
    from hier_pipeline.model.train_config import TrainConfig

    content = ContentArtifact(home / "content" / f"{name}.pt").load()
    model = ModelArtifact(home / "models" / f"{name}.pt", 0, {}, [], {}).load(graph, content)
    return embed_entities(
        model, graph, content, path, TrainConfig().neighbourhoods(len(graph.metadata.stages)), as_of
    )


def _hierarchy(
    embeddings: Any, graph: Any, spec: Any, database: Path, truth: Any, configs: list[Any]
) -> tuple[dict[str, Any], Any]:
    """Per seed: build time, per-level agreement with the truth; stability between the seeds;
    the super-graph's density; the reference rows. Also returns the first seed's tree."""
    import torch

    from hier_pipeline.interests.entities import primary_keys
    from hier_pipeline.interests.hierarchy import build_hierarchy
    from hier_pipeline.interests.kmeans import one_thread, spherical_kmeans
    from hier_pipeline.interests.quality import chance_agreement, level_agreement
    from hier_pipeline.interests.supergraph import build_supergraph, supergraph_stats

    meta = graph.metadata
    vectors = embeddings.load()
    items = vectors[meta.item_type]
    trees, seconds = [], []
    for config in configs:
        started = time.perf_counter()
        trees.append(build_hierarchy(items, config))
        seconds.append(time.perf_counter() - started)
    tree = trees[0]
    supergraph = build_supergraph(graph, tree.path(vectors[meta.user_type]), tree.members, tree)
    out: dict[str, Any] = {
        "sizes": tree.primitives_per_level(),
        "build_seconds": [round(s, 2) for s in seconds],
        "stability": [
            level_agreement(trees[0].members[:, level], trees[1].members[:, level])
            for level in range(tree.levels)
        ],
        "supergraph": supergraph_stats(supergraph, tree, graph),
    }
    if truth is None:
        return out, tree
    keys = primary_keys(database, spec, [meta.item_type])[meta.item_type]
    truth = truth.set_index(truth.columns[0])
    truth.index = truth.index.astype(str)
    labels = truth.loc[keys, [c for c in truth.columns if c.endswith("_id")]]
    out["truth_levels"] = {c: int(labels[c].nunique()) for c in labels}
    truth_sizes = tuple(out["truth_levels"].values())
    sized = build_hierarchy(items, replace(configs[0], sizes=truth_sizes))
    primitives = torch.nn.functional.normalize(embeddings.primitives(), dim=1)
    nearest = (items @ primitives.T).argmax(dim=1) if len(primitives) else None
    rows: dict[str, list[dict[str, float]]] = {}
    for level, column in enumerate(labels):
        target = labels[column].to_numpy()
        level_index = min(level, tree.levels - 1)
        for seed, grown in zip((c.seed for c in configs), trees, strict=True):
            rows.setdefault(f"tree seed {seed}", []).append(
                level_agreement(grown.members[:, level_index], target)
            )
        rows.setdefault(f"tree at the truth's sizes {truth_sizes}", []).append(
            level_agreement(sized.members[:, min(level, sized.levels - 1)], target)
        )
        rows.setdefault("chance (shuffled tree)", []).append(
            chance_agreement(tree.members[:, level_index], target)
        )
        with one_thread():
            flat = spherical_kmeans(
                items, tree.primitives_per_level()[level_index], torch.Generator().manual_seed(0)
            )
        rows.setdefault("flat k-means, same size", []).append(level_agreement(flat.labels, target))
        if nearest is not None:
            rows.setdefault(f"model primitives (K={len(primitives)})", []).append(
                level_agreement(nearest, target)
            )
    out["agreement"] = rows
    return out, tree


def _training_stability(first: Any, second: Any, graph: Any, config: Any) -> list[Any]:
    """Per level, NMI/ARI between the trees grown (same k-means seed) on two trainings' items."""
    from hier_pipeline.interests.hierarchy import build_hierarchy
    from hier_pipeline.interests.quality import level_agreement

    item_type = graph.metadata.item_type
    trees = [build_hierarchy(e.load()[item_type], config) for e in (first, second)]
    return [
        level_agreement(trees[0].members[:, level], trees[1].members[:, level])
        for level in range(trees[0].levels)
    ]


def _retrieval(embeddings: Any, graph: Any, split: Any, tree: Any) -> dict[str, Any]:
    """Recall@50 of the target stage in [t1, t2) by embedding, by tokens, by popularity."""
    import torch

    from hier_pipeline.evaluation.baselines import popularity_metrics
    from hier_pipeline.interests.tokens import InvertedIndex, TokenConfig, assign_tokens
    from hier_pipeline.ranking.metrics import evaluate_embeddings, ranking_metrics
    from hier_pipeline.ranking.window import target_window

    meta = graph.metadata
    vectors = embeddings.load()
    window = target_window(graph, split.t1, split.t2, max_users=1000)
    users, items = vectors[meta.user_type][window.users], vectors[meta.item_type]
    out: dict[str, Any] = {"users": len(window.users)}
    for top_k in (1, 3, 5):
        token_config = TokenConfig(top_k=top_k)
        user_bags = assign_tokens(users, tree, token_config)
        index = InvertedIndex(assign_tokens(items, tree, token_config), len(tree.parent))
        ranked = torch.stack(
            [
                torch.sort(
                    index.scores(user_bags.tokens[u], user_bags.weights[u]),
                    descending=True,
                    stable=True,
                ).indices[:K]
                for u in range(len(users))
            ]
        )
        out[f"tokens (top_k={top_k})"] = ranking_metrics(ranked, window.relevant, (K,))
    out["embedding"] = evaluate_embeddings(users, items, window.relevant, (K,))
    out["popularity"] = popularity_metrics(graph, window, split.t1, K)
    return out


def _latency(
    embeddings: Any, graph: Any, spec: Any, database: Path, config: Any, scratch: str
) -> dict[str, float]:
    """Median milliseconds per query over 100 calls, on the index over freshly built outputs."""
    from hier_pipeline.interests.build import build_interest_hierarchy, build_interest_tokens
    from hier_pipeline.interests.index import InterestIndex
    from hier_pipeline.interests.tokens import TokenConfig

    folder = Path(scratch) / "interests"
    hierarchy = build_interest_hierarchy(embeddings, graph, folder, config)
    build_interest_tokens(embeddings, hierarchy, spec, database, folder, TokenConfig())
    started = time.perf_counter()
    index = InterestIndex.open(folder)
    opened = time.perf_counter() - started
    user, item = index.keys[spec.roles.user][0], index.keys[spec.roles.item][0]
    queries = {
        "top_items by embedding": lambda: index.top_items(user, 10),
        "top_items by tokens": lambda: index.top_items(user, 10, by="tokens"),
        "similar_items": lambda: index.similar_items(item, 10),
        "users_for_interest": lambda: index.users_for_interest(index.hierarchy.token_ids[0], 10),
        "explain": lambda: index.explain(user, item),
    }
    if "advertiser" in index.roles:
        advertiser = index.keys[index.roles["advertiser"]][0]
        queries["top_advertisers"] = lambda: index.top_advertisers(user, 10)
        queries["advertiser_interests"] = lambda: index.advertiser_interests(advertiser)
    latency = {"open_index": round(1000 * opened, 1)}
    for name, query in queries.items():
        times = []
        for _ in range(100):
            started = time.perf_counter()
            query()
            times.append(time.perf_counter() - started)
        latency[name] = round(1000 * statistics.median(times), 3)
    return latency


def _print(results: dict[str, Any]) -> None:
    hierarchy = results["hierarchy"]
    print(f"\nprimitives per level: {hierarchy['sizes']}, built in {hierarchy['build_seconds']} s")
    if "agreement" in hierarchy:
        levels = list(hierarchy["truth_levels"])
        print(f"truth classes: {hierarchy['truth_levels']}\n")
        print("| NMI / ARI | " + " | ".join(levels) + " |\n|---|" + "---:|" * len(levels))
        for name, row in hierarchy["agreement"].items():
            cells = " | ".join(f"{a['nmi']:.3f} / {a['ari']:.3f}" for a in row)
            print(f"| {name} | {cells} |")
    stability = " / ".join(f"{a['ari']:.3f}" for a in hierarchy["stability"])
    print(f"\nstability (ARI between the two seeds, per level): {stability}")
    if "training_seed_stability" in results:
        across = " / ".join(f"{a['ari']:.3f}" for a in results["training_seed_stability"])
        print(f"stability across two training seeds (ARI per level): {across}")
    print("\n| level | nodes | edges | density | raw density | ratio | self-loop share |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in hierarchy["supergraph"]:
        print(
            f"| L{s['level']} | {s['nodes']} | {s['edges']} | {s['density']:.4f} | "
            f"{s['raw_density']:.6f} | {s['density_ratio']:.1f}x | {s['self_loop_share']:.2f} |"
        )
    retrieval = results["retrieval"]
    print(f"\nvalidation window: {retrieval['users']} users; recall@{K} / ndcg@{K}")
    for name, metrics in retrieval.items():
        if name != "users":
            print(f"  {name:<20} {metrics[f'recall@{K}']:.4f} / {metrics[f'ndcg@{K}']:.4f}")
    print(f"\nlatency (median ms): {results['latency_ms']}")


if __name__ == "__main__":
    sys.exit(main())
