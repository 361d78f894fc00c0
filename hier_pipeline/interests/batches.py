"""Entities that arrived after the interests stage ran: their keys, embeddings and bags, one file
per batch beside the stage's tokens (`<folder>/batches/<batch>.pt`), merged on open by
`InterestIndex`.

A batch file holds the fingerprint of the tree its bags index: after a retrain grows another tree
the file no longer applies and is skipped (the retrain's full run has the batch's rows anyway).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from hier_pipeline.atomic import atomic_path
from hier_pipeline.interests.tokens import TokenBags

BATCHES = "batches"


@dataclass(frozen=True)
class BatchTokens:
    batch: str
    hierarchy: str  # `fingerprint` of the tree the bags index
    keys: dict[str, list[str]]  # node type -> primary keys of the batch's entities
    vectors: dict[str, Tensor]  # node type -> [n, dim] unit-norm embeddings
    bags: dict[str, TokenBags]


def fingerprint(path: Path) -> str:
    """What identifies a tree file: a digest of its bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def save_batch_tokens(tokens: BatchTokens, folder: Path) -> Path:
    path = folder / BATCHES / f"{tokens.batch}.pt"
    with atomic_path(path) as partial:
        torch.save(
            {
                "batch": tokens.batch,
                "hierarchy": tokens.hierarchy,
                "keys": tokens.keys,
                "vectors": tokens.vectors,
                "bags": {t: vars(b) for t, b in tokens.bags.items()},
            },
            partial,
        )
    return path


def load_batch_tokens(folder: Path, hierarchy: Path) -> list[BatchTokens]:
    """The batch files under `folder` that index the tree at `hierarchy`, in batch order."""
    current = fingerprint(hierarchy)
    found = []
    for path in sorted((folder / BATCHES).glob("*.pt")):
        payload = torch.load(path, weights_only=True)
        if payload["hierarchy"] == current:
            found.append(
                BatchTokens(
                    payload["batch"],
                    payload["hierarchy"],
                    payload["keys"],
                    payload["vectors"],
                    {t: TokenBags(**b) for t, b in payload["bags"].items()},
                )
            )
    return found


def merge_batches(
    keys: dict[str, list[str]],
    vectors: dict[str, Tensor],
    bags: dict[str, TokenBags],
    batches: list[BatchTokens],
) -> tuple[dict[str, list[str]], dict[str, Tensor], dict[str, TokenBags]]:
    """The stage's entities followed by each batch's, per node type. An entity whose key is
    already known keeps its first row (a batch never overrides the dataset)."""
    keys = {t: list(k) for t, k in keys.items()}
    vectors, bags = dict(vectors), dict(bags)
    for batch in batches:
        for node_type, batch_keys in batch.keys.items():
            known = set(keys[node_type])
            fresh = torch.tensor([k not in known for k in batch_keys], dtype=torch.bool)
            if not fresh.any():
                continue
            keys[node_type] += [k for k, f in zip(batch_keys, fresh.tolist(), strict=True) if f]
            vectors[node_type] = torch.cat([vectors[node_type], batch.vectors[node_type][fresh]])
            old, new = bags[node_type], batch.bags[node_type]
            bags[node_type] = TokenBags(
                torch.cat([old.path, new.path[fresh]]),
                torch.cat([old.tokens, new.tokens[fresh]]),
                torch.cat([old.weights, new.weights[fresh]]),
            )
    return keys, vectors, bags
