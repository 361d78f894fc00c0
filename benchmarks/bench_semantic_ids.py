"""The interest tree of semantic IDs across training seeds: agreement with a known taxonomy, ARI
between the trees of two training seeds, token vs embedding retrieval, ids kept by a refit after a
retrain on 1% more events, and whether a cold item's tokens from content alone match its tokens
after a week of events (docs/interests.md holds the results).

    .venv/bin/python benchmarks/bench_semantic_ids.py DATASET_DIR --work WORK
        [--seeds 0 1 2] [--weights 0.5 0.8 1.0] [--truth T.parquet] [--epochs 4] [--steps 30]

Our model is trained once per seed (as `TrainConfig` says, `--epochs`/`--steps` aside) on events
before t1; items and users are embedded as of t2 (and items again as of the end of the data, for
the cold items); each tree is grown on the t2 vectors, the items' content and the events before
t2, at the sizes the data gives. Retrieval: purchases (the target stage) in [t2, end) of at most
1,000 users, full ranking, ties by popularity before t2, as the evaluation ranks. Truth: a
parquet whose first column is the item key and whose `*_id` columns are levels coarse -> fine
(default: DATASET_DIR/truth/<item table>.parquet, the synthetic world's planted interests).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path
from typing import Any

from harness import write_results

K = 50
WEEK = 7 * 86_400


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset_dir", type=Path)
    parser.add_argument("--work", type=Path, required=True, help="scratch folder (vectors cached)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--weights", type=float, nargs="+", default=[0.5, 0.8, 1.0])
    parser.add_argument("--truth", type=Path)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    arguments = parser.parse_args()

    import torch

    from hier_pipeline.evaluation.compare import data_end
    from hier_pipeline.pipeline.prepare import prepare

    torch.set_num_threads(1)
    prepared = prepare(arguments.dataset_dir, arguments.work, arguments.work / "content_cache")
    end = data_end(prepared.graph)
    vectors = {seed: _vectors(prepared, seed, arguments, end) for seed in arguments.seeds}
    truth = _truth(arguments, prepared)
    results: dict[str, Any] = {"dataset": prepared.spec.name, "seeds": arguments.seeds}
    for weight in arguments.weights:
        results[f"content_weight={weight}"] = _figures(prepared, vectors, truth, weight, end)
    write_results(f"semantic_ids_{prepared.spec.name}", results)
    return 0


def _vectors(prepared: Any, seed: int, arguments: Any, end: int) -> dict[str, Any]:
    """{"t2": {"item", "user"}, "end": {"item"}} of the model trained with `seed`, cached."""
    import torch

    from hier_pipeline.evaluation.interest_recommender import AsOf
    from hier_pipeline.model.train import train_model
    from hier_pipeline.model.train_config import TrainConfig

    path = arguments.work / f"vectors_seed{seed}.pt"
    if path.is_file():
        cached: dict[str, Any] = torch.load(path, weights_only=True)
        return cached
    graph, meta = prepared.graph, prepared.graph.metadata
    config = TrainConfig(seed=seed, epochs=arguments.epochs, steps_per_epoch=arguments.steps)
    model = train_model(graph, prepared.content, prepared.split, config).model
    items = torch.arange(int(graph.data[meta.item_type].num_nodes))
    users = torch.arange(int(graph.data[meta.user_type].num_nodes))
    found = {}
    for name, as_of in (("t2", prepared.split.t2), ("end", end)):
        embed = AsOf(model, graph, prepared.content, config.neighbourhoods(len(meta.stages)), as_of)
        found[name] = {"item": embed(meta.item_type, items), "user": embed(meta.user_type, users)}
    torch.save(found, path)
    return found


def _truth(arguments: Any, prepared: Any) -> Any:
    import pandas as pd

    from hier_pipeline.evaluation.truth import item_truth
    from hier_pipeline.interests.entities import primary_keys

    if arguments.truth is None:
        return item_truth(arguments.dataset_dir, prepared.spec, prepared.database)
    table = pd.read_parquet(arguments.truth)
    table = table.set_index(table.columns[0])
    table.index = table.index.astype(str)
    item = prepared.spec.roles.item
    keys = primary_keys(prepared.database, prepared.spec, [item])[item]
    return table.loc[keys, [c for c in table.columns if c.endswith("_id")]].to_numpy()


def _figures(prepared: Any, vectors: dict, truth: Any, weight: float, end: int) -> dict:
    import torch

    from hier_pipeline.evaluation.baselines.recommender import recommend
    from hier_pipeline.evaluation.interest_recommender import (
        EmbeddingRecommender,
        TokenRecommender,
    )
    from hier_pipeline.interests.events import funnel_events
    from hier_pipeline.interests.hierarchy import HierarchyConfig, build_hierarchy
    from hier_pipeline.interests.quality import level_agreement
    from hier_pipeline.interests.tokens import TokenConfig
    from hier_pipeline.ranking.metrics import ranking_metrics
    from hier_pipeline.ranking.window import target_window

    graph, split = prepared.graph, prepared.split
    content = prepared.content.get(graph.metadata.item_type)
    events = funnel_events(graph, before=split.t2)
    config = HierarchyConfig(content_weight=weight)
    window = target_window(graph, split.t2, end, max_users=1000)
    items = len(vectors[next(iter(vectors))]["t2"]["item"])
    popularity = torch.bincount(events.items, minlength=items).double()
    trees, out = {}, {}
    for seed, found in vectors.items():
        tree = build_hierarchy(found["t2"]["item"], config, content, events)
        trees[seed] = tree
        users = found["t2"]["user"][window.users]
        rankers = {
            "tokens": TokenRecommender(window.users, users, tree, TokenConfig(), events, split.t2),
            "embedding": EmbeddingRecommender(window.users, users, found["t2"]["item"]),
        }
        out[f"seed{seed}"] = {
            "sizes": tree.primitives_per_level(),
            "merge_share": tree.merge_share,
            "largest_level0_share": round(float(tree.sizes()[: tree.offsets[1]].max()) / items, 3),
            **{
                f"{name}_recall@{K}": round(
                    ranking_metrics(
                        recommend(ranker, window.users, K, popularity), window.relevant, (K,)
                    )[f"recall@{K}"],
                    3,
                )
                for name, ranker in rankers.items()
            },
            "cold_items_same_tokens": _cold(prepared, found, tree, content, end),
        }
        if truth is not None:
            out[f"seed{seed}"]["ami"] = [
                round(level_agreement(tree.members[:, level], truth[:, level])["ami"], 3)
                for level in range(min(tree.levels, truth.shape[1]))
            ]
    for a, b in itertools.combinations(vectors, 2):
        out[f"ari_seed{a}_seed{b}"] = [
            round(level_agreement(trees[a].members[:, i], trees[b].members[:, i])["ari"], 3)
            for i in range(trees[a].levels)
        ]
        out[f"refit_seed{a}_to_seed{b}"] = _refit(prepared, vectors, a, b, config, content)
    return out


def _cold(prepared: Any, found: dict, tree: Any, content: Any, end: int) -> dict:
    """Items first engaged after t2 with a week of events before the end: the share whose tokens
    per level from content alone (embedded at t2, before any event) equal those after their
    events (embedded at the end), both placed as arrivals are (`InterestHierarchy.item_codes`:
    the nearest finest code in the fused space, and its ancestors)."""
    import torch

    from hier_pipeline.interests.events import funnel_events

    events = funnel_events(prepared.graph)
    count = len(tree.members)
    first = torch.full((count,), end, dtype=torch.long).scatter_reduce(
        0, events.items, events.time, reduce="amin"
    )
    cold = ((first >= prepared.split.t2) & (first < end - WEEK)).nonzero().flatten()
    rows = None if content is None else {k: v[cold] for k, v in content.items()}
    before = tree.item_codes(found["t2"]["item"][cold], rows)
    after = tree.item_codes(found["end"]["item"][cold], rows)
    same = (before == after).double().mean(dim=0).tolist() if len(cold) else []
    return {"items": len(cold), "per_level": [round(s, 3) for s in same]}


def _refit(prepared: Any, vectors: dict, a: int, b: int, config: Any, content: Any) -> dict:
    """The tree of seed `a` on events before the last 1%, then seed `b`'s model on all events
    before t2: share of the old ids kept per level (`stable_token_ids`), refitted or grown anew."""
    import dataclasses

    import torch

    from hier_pipeline.interests.events import funnel_events
    from hier_pipeline.interests.hierarchy import build_hierarchy
    from hier_pipeline.interests.matching import stable_token_ids

    events = funnel_events(prepared.graph, before=prepared.split.t2)
    cut = int(torch.quantile(events.time.double(), 1 / 1.01))
    old = build_hierarchy(
        vectors[a]["t2"]["item"], config, content, funnel_events(prepared.graph, before=cut)
    )
    sized = dataclasses.replace(config, sizes=old.primitives_per_level())
    keys = [str(i) for i in range(len(old.members))]
    out = {}
    for name, previous in (("refitted", old.members), ("grown_anew", None)):
        new = build_hierarchy(vectors[b]["t2"]["item"], sized, content, events, previous)
        kept = set(stable_token_ids(old, keys, new, keys)) & set(old.token_ids)
        level_of = dict(zip(old.token_ids, old.level_of().tolist(), strict=True))
        out[name] = [
            round(sum(level_of[t] == level for t in kept) / size, 3)
            for level, size in enumerate(old.primitives_per_level())
        ]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
