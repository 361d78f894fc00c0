"""The token vocabulary: one row per primitive with its parent, size, label and example items,
and how the tokens are used across entities."""

from __future__ import annotations

import math

import pandas as pd
import torch

from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.tokens import TokenBags


def vocabulary_table(
    hierarchy: InterestHierarchy,
    bags: dict[str, TokenBags],
    words: list[list[str]],
    examples: list[list[str]],
) -> pd.DataFrame:
    """Columns: token, level, parent ("" at level 0), items (items on its path), one
    `<entity type>_bags` count per entity type (bags holding it), label (`words`: its shared
    categorical values and distinctive words),
    examples (keys of the items nearest its centroid)."""
    ids = hierarchy.token_ids
    table = pd.DataFrame(
        {
            "token": ids,
            "level": hierarchy.level_of().numpy(),
            "parent": [ids[p] if p >= 0 else "" for p in hierarchy.parent.tolist()],
            "items": hierarchy.sizes().numpy(),
        }
    )
    for node_type, bag in bags.items():
        held = bag.tokens[bag.tokens >= 0]
        table[f"{node_type}_bags"] = torch.bincount(held, minlength=len(ids)).numpy()
    table["label"] = [", ".join(w) for w in words]
    table["examples"] = examples
    return table


def orphan_tokens(vocabulary: pd.DataFrame) -> list[str]:
    """Tokens whose parent is not in the vocabulary, or whose level is not one below it."""
    level = dict(zip(vocabulary["token"], vocabulary["level"], strict=True))
    return [
        token
        for token, parent, own in zip(
            vocabulary["token"], vocabulary["parent"], vocabulary["level"], strict=True
        )
        if (own == 0 and parent != "") or (own > 0 and level.get(parent) != own - 1)
    ]


def usage_stats(hierarchy: InterestHierarchy, bags: dict[str, TokenBags]) -> list[dict[str, float]]:
    """Per level: tokens, coverage (share of tokens in some bag), the entropy of entities' path
    tokens normalised by log(tokens) (1: spread evenly, 0: everyone on one token), and the share
    of entities with a token at that level."""
    rows = []
    for level in range(hierarchy.levels):
        span = hierarchy.level(level)
        count = span.stop - span.start
        held = torch.cat([b.tokens[:, level][b.tokens[:, level] >= 0] for b in bags.values()])
        path = torch.cat([b.path[:, level] for b in bags.values()]) - span.start
        share = torch.bincount(path, minlength=count).double() / max(1, len(path))
        entropy = -(share[share > 0] * share[share > 0].log()).sum().item()
        with_token = torch.cat([(b.tokens[:, level] >= 0).any(dim=1) for b in bags.values()])
        rows.append(
            {
                "level": level,
                "tokens": count,
                "coverage": len(torch.unique(held)) / count,
                "entropy": entropy / math.log(count) if count > 1 else 0.0,
                "entities_with_token": with_token.double().mean().item(),
            }
        )
    return rows
