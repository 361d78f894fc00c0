"""How well an arrival batch's bags name the planted interests of what it adds: the bags served
(advertisers by their products' events or catalogue, users by their events: `incremental/bags.py`)
against the same entities placed by their embeddings (`assign_tokens`, what arrivals served
before), on a generated world whose truth/ plants every product's and user's interests.

    make demo
    .venv/bin/hier generate-batch WORLD --fraction 0.1    # [rm WORLD/incoming/batchN/events.parquet]
    .venv/bin/hier arrivals WORLD --once
    .venv/bin/python benchmarks/bench_arrival_bags.py SERVED WORLD batchN

SERVED: the serving folder (`hier where`), WORLD: the generated dataset folder. Per level, the
mean over the batch's new advertisers (and the users it embedded again) of the bag's weight on
tokens whose planted label (the majority over the tree's items) is one of the entity's own: its
products' coarse / mid / fine interests, a user's planted fine interests and their parents.
And the ad-matching query for the batch's held-out purchases (`advertisers_for_buyers`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from harness import write_results

from hier_pipeline.interests.arrivals import load_batch_tokens
from hier_pipeline.interests.artifact import load_hierarchy, load_tokens
from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.index import InterestIndex
from hier_pipeline.interests.tokens import NO_TOKEN, TokenBags, TokenConfig, assign_tokens

LEVELS = ("coarse_id", "mid_id", "fine_id")  # the planted truth's columns, coarse to fine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("served", type=Path)
    parser.add_argument("world", type=Path)
    parser.add_argument("batch")
    arguments = parser.parse_args()
    tokens = load_tokens(arguments.served / "tokens.pt")
    tree = load_hierarchy(tokens.hierarchy)
    truth = arguments.world / "truth"
    products = pd.read_parquet(truth / "products.parquet").set_index("product_id")
    keys = [int(k) for k in tokens.keys[tokens.roles["item"]]]
    labels = token_labels(tree, products.loc[keys, list(LEVELS[: tree.levels])])
    (batch,) = [
        b
        for b in load_batch_tokens(arguments.served, tokens.hierarchy)
        if b.batch == arguments.batch
    ]
    incoming = arguments.world / "incoming" / arguments.batch
    owned = pd.read_parquet(incoming / "products.parquet")
    new = set(pd.read_parquet(incoming / "advertisers.parquet")["advertiser_id"])
    wanted: dict[str, list[list[set[int]]]] = {"advertisers": [], "users": []}
    rows: dict[str, list[int]] = {"advertisers": [], "users": []}
    for row, key in enumerate(int(k) for k in batch.keys.get("advertisers", [])):
        if key in new:
            mine = products.loc[owned.loc[owned.advertiser_id == key, "product_id"]]
            wanted["advertisers"].append([set(mine[c]) for c in LEVELS[: tree.levels]])
            rows["advertisers"].append(row)
    users = pd.read_parquet(truth / "users.parquet").set_index("user_id")
    parents = pd.read_parquet(truth / "hierarchy.parquet").set_index("fine_id")
    for row, key in enumerate(int(k) for k in batch.keys.get("users", [])):
        fines = list(users.loc[key, "fine_ids"])
        named = [set(parents.loc[fines, c]) for c in LEVELS[:2]] + [set(fines)]
        wanted["users"].append(named[: tree.levels])
        rows["users"].append(row)
    config = TokenConfig(top_k=next(iter(batch.bags.values())).tokens.shape[2])
    results: dict[str, dict[str, Any]] = {}
    for node_type in ("advertisers", "users"):
        if not rows[node_type]:
            continue
        picked = torch.tensor(rows[node_type])
        served = batch.bags[node_type]
        by_embedding = assign_tokens(batch.vectors[node_type][picked], tree, config)
        results[node_type] = {
            "entities": len(picked),
            "served": precision(served.rows(picked), labels, wanted[node_type]),
            "by_embedding": precision(by_embedding, labels, wanted[node_type]),
        }
        for how in ("served", "by_embedding"):
            figures = " / ".join(f"{p:.3f}" for p in results[node_type][how])
            print(f"{node_type} ({len(picked)}), {how}: {figures}")
    results["advertisers_for_buyers"] = advertisers_for_buyers(
        arguments.served, arguments.world, arguments.batch, new, config
    )
    write_results("arrival_bags", results)
    return 0


def advertisers_for_buyers(
    served: Path, world: Path, name: str, new: set[int], config: TokenConfig
) -> dict[str, float | int]:
    """The ad-matching query for the batch's held-out purchases (truth/batches/<batch>/): is the
    new product's advertiser among the buyer's top 10 advertisers by shared tokens
    (`InterestIndex.top_advertisers`), among every advertiser served, with the batch's
    advertisers placed as served or by their embeddings; and by embedding, for reference."""
    index = InterestIndex.open(served)
    tokens = load_tokens(served / "tokens.pt")
    batches = load_batch_tokens(served, tokens.hierarchy)
    placed = []
    for batch in batches:
        bags = dict(batch.bags)
        if batch.batch == name:
            bags["advertisers"] = assign_tokens(
                batch.vectors["advertisers"], index.hierarchy, config
            )
        placed.append(replace(batch, bags=bags))
    by_embedding = InterestIndex(tokens, index.hierarchy, index.labels, placed)
    bought = pd.read_parquet(world / "truth" / "batches" / name / "purchases.parquet")
    owners = pd.read_parquet(world / "incoming" / name / "products.parquet")
    bought = bought.merge(owners[["product_id", "advertiser_id"]], on="product_id")
    bought = bought[bought.advertiser_id.isin(new)].drop_duplicates(["user_id", "advertiser_id"])
    found = {"tokens, served": 0, "tokens, by embedding": 0, "embedding": 0}
    for user, advertiser in zip(bought.user_id, bought.advertiser_id.astype(str), strict=True):
        for how, ranked in (
            ("tokens, served", index.top_advertisers(user, 10, by="tokens")),
            ("tokens, by embedding", by_embedding.top_advertisers(user, 10, by="tokens")),
            ("embedding", index.top_advertisers(user, 10, by="embedding")),
        ):
            found[how] += advertiser in {match.key for match in ranked}
    recall = {f"recall@10 ({how})": hits / len(bought) for how, hits in found.items()}
    for how, value in recall.items():
        print(f"held-out buyers' new advertiser in their top 10, {how}: {value:.3f}")
    return {"pairs": len(bought), **recall}


def token_labels(tree: InterestHierarchy, planted: pd.DataFrame) -> list[dict[int, int]]:
    """Per level, each token's planted label: the most common among the tree's items in it."""
    return [
        pd.DataFrame({"token": tree.members[:, level].numpy(), "label": planted.iloc[:, level]})
        .groupby("token")["label"]
        .agg(lambda labels: labels.mode().iloc[0])
        .to_dict()
        for level in range(tree.levels)
    ]


def precision(
    bags: TokenBags, labels: list[dict[int, int]], wanted: Sequence[list[set[int]]]
) -> list[float]:
    """Per level, the mean over rows of the bag's weight share on tokens labelled one of the
    row's own planted labels."""
    per_level = []
    for level, by_token in enumerate(labels):
        shares = []
        for row, own in enumerate(wanted):
            tokens, weights = bags.tokens[row, level], bags.weights[row, level]
            named = tokens != NO_TOKEN
            hit = sum(
                float(w)
                for t, w in zip(tokens[named].tolist(), weights[named], strict=True)
                if by_token.get(t) in own[level]
            )
            shares.append(hit / max(float(weights[named].sum()), 1e-12))
        per_level.append(sum(shares) / len(shares))
    return per_level


if __name__ == "__main__":
    raise SystemExit(main())
