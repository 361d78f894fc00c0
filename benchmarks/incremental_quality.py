"""The quality half of `bench_incremental.py`: how the held-out purchases of a batch's new items
rank, from the incremental embeddings and from a full rebuild embedded by the same model; and
the training config both runs share (epochs and steps from `BENCH_TRAIN`, set by the benchmark).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

BATCH = "batch0001"
HELD_OUT = "held_out.parquet"  # user key, item key of the held-out target events
K = 50
K_AMONG_NEW = 10  # the new items ranked among themselves (a batch may hold fewer than K)


def train_config() -> Any:
    from dataclasses import replace

    from hier_pipeline.model.train_config import TrainConfig

    epochs, steps = os.environ.get("BENCH_TRAIN", ",").split(",")
    config = TrainConfig()
    if epochs:
        config = replace(config, epochs=int(epochs))
    if steps:
        config = replace(config, steps_per_epoch=int(steps))
    return config


def new_item_quality(folder: str, out: str) -> dict[str, Any]:
    """Recall@50 of the held-out purchases of new items: the incremental embeddings, the same
    model over a full rebuild with the batch, and the evaluation's cold-start figure."""
    import pandas as pd
    import torch

    from hier_pipeline.dataset import load_dataset, parse_dataset
    from hier_pipeline.dataset.arrivals import with_batches
    from hier_pipeline.evaluation.compare import Comparison, evaluate_models
    from hier_pipeline.evaluation.report import OURS
    from hier_pipeline.graph import build_graph, default_split, load_graph
    from hier_pipeline.interests.artifact import load_tokens
    from hier_pipeline.interests.entities import primary_keys
    from hier_pipeline.interests.index import InterestIndex
    from hier_pipeline.model.artifact import load_model
    from hier_pipeline.model.embeddings import embed_entities

    root, spec = Path(out), parse_dataset(Path(folder))
    user_type, item_type = spec.roles.user, spec.roles.item
    held = pd.read_parquet(root.parent / HELD_OUT).astype(str)
    index = InterestIndex.open(root / "interests")
    ours = _recall(index.keys, index.vectors, held, user_type, item_type)
    before = set(load_tokens(root / "interests" / "tokens.pt").keys[item_type])
    new_items = {k for k in index.keys[item_type] if k not in before}
    ours_among_new = _recall(
        index.keys, index.vectors, held, user_type, item_type, new_items, K_AMONG_NEW
    )

    everything = with_batches(spec)
    raw = load_dataset(everything, root / "everything.duckdb")
    full = build_graph(everything, raw.database)
    content = torch.load(root / "content.pt", weights_only=True)
    content = _with_batch_content(content, root)
    model = load_model(root / "model.pt", full, content)
    sampling = train_config().neighbourhoods(len(full.metadata.stages))
    vectors = embed_entities(model, full, content, root / "everything.pt", sampling).load()
    keys = primary_keys(raw.database, everything, [user_type, item_type])
    rebuilt = _recall(keys, vectors, held, user_type, item_type)
    rebuilt_among_new = _recall(keys, vectors, held, user_type, item_type, new_items, K_AMONG_NEW)

    base = load_graph(root / "graph.pt")
    base_content = torch.load(root / "content.pt", weights_only=True)
    comparison = Comparison(
        models={OURS: load_model(root / "model.pt", base, base_content)},
        sampling=sampling,
        views=(),  # the model's own row is what is compared
        baselines=("popularity",),
    )
    report = evaluate_models(spec.name, base, base_content, default_split(base), comparison)
    return {
        "held_out_pairs": len(held),
        f"new_item_recall@{K}_incremental": ours,
        f"new_item_recall@{K}_full_rebuild": rebuilt,
        "new_items": len(new_items),
        f"new_item_recall@{K_AMONG_NEW}_among_new_items_incremental": ours_among_new,
        f"new_item_recall@{K_AMONG_NEW}_among_new_items_full_rebuild": rebuilt_among_new,
        f"new_item_recall@{K_AMONG_NEW}_among_new_items_chance": round(
            K_AMONG_NEW / max(len(new_items), K_AMONG_NEW), 4
        ),
        f"evaluation_cold_item_recall@{K}": report.models[OURS].get(f"cold_item_recall@{K}"),
        f"evaluation_popularity_cold_item_recall@{K}": report.models["popularity"].get(
            f"cold_item_recall@{K}"
        ),
        "evaluation_cold_users": report.cold_users,
    }


def _with_batch_content(content: dict, root: Path) -> dict:
    """The base content with the batch's vectors appended (what the incremental run embedded)."""
    import torch

    added = torch.load(root / "arrivals" / f"{BATCH}_content.pt", weights_only=True)
    return {
        t: {k: torch.cat([v, added[t][k]]) for k, v in tensors.items()} if t in added else tensors
        for t, tensors in content.items()
    }


def _recall(
    keys: dict[str, list[str]],
    vectors: dict,
    held: Any,
    user_type: str,
    item_type: str,
    among: set[str] | None = None,
    k: int = K,
) -> float | None:
    """Mean over users of the share of their held-out new items in their top `k` of all items
    (of the items `among` only, when given: where the new items stand among themselves, a
    figure that is not zero when none of them reaches an all-items top K)."""
    import torch

    users = {k: i for i, k in enumerate(keys[user_type])}
    items = {k: i for i, k in enumerate(keys[item_type])}
    candidates = torch.tensor(
        [i for k, i in items.items() if among is None or k in among], dtype=torch.long
    )
    pairs = held[held.iloc[:, 0].isin(users) & held.iloc[:, 1].isin(items)]
    recalls = []
    for user, group in pairs.groupby(pairs.columns[0]):
        scores = vectors[item_type][candidates] @ vectors[user_type][users[user]]
        top = set(candidates[scores.topk(min(k, len(scores))).indices].tolist())
        wanted = {items[k] for k in group.iloc[:, 1]}
        recalls.append(len(top & wanted) / len(wanted))
    return round(float(torch.tensor(recalls).mean()), 4) if recalls else None
