"""Entities that arrived after the interests stage ran, and the dataset's entities a batch embedded
again: their keys, embeddings and bags, one file per batch beside the stage's tokens
(`<folder>/batches/<batch>.pt`), merged on open by `InterestIndex`.

A batch file holds the fingerprint of the tree its bags index: after a retrain grows another tree
the file no longer applies and is skipped (the retrain's full run has the batch's rows anyway).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from hier_pipeline.files.atomic import atomic_path
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
    """The stage's entities followed by each batch's new ones, per node type. An entity whose key
    is already known takes the batch's vector and bag in its row (a batch embeds again the
    dataset's entities its rows point at; the last batch to do so wins)."""
    keys = {t: list(k) for t, k in keys.items()}
    vectors = {t: v.clone() for t, v in vectors.items()}
    bags = {
        t: TokenBags(b.path.clone(), b.tokens.clone(), b.weights.clone()) for t, b in bags.items()
    }
    for batch in batches:
        for node_type, batch_keys in batch.keys.items():
            row = {k: i for i, k in enumerate(keys[node_type])}
            fresh = [k not in row for k in batch_keys]
            keys[node_type] += [k for k, f in zip(batch_keys, fresh, strict=True) if f]
            known = [row.get(k, -1) for k in batch_keys]
            vectors[node_type], bags[node_type] = _merged_rows(
                vectors[node_type], bags[node_type], batch, node_type, torch.tensor(known)
            )
    return keys, vectors, bags


def _merged_rows(
    vectors: Tensor, bags: TokenBags, batch: BatchTokens, node_type: str, known: Tensor
) -> tuple[Tensor, TokenBags]:
    """`known[i]`: the row batch entity i replaces, -1 for a new one (appended in batch order).
    Writes into `vectors` and `bags`."""
    replaced, appended = known >= 0, known < 0

    def merge(current: Tensor, incoming: Tensor) -> Tensor:
        current[known[replaced]] = incoming[replaced]
        return torch.cat([current, incoming[appended]])

    incoming = batch.bags[node_type]
    return merge(vectors, batch.vectors[node_type]), TokenBags(
        merge(bags.path, incoming.path),
        merge(bags.tokens, incoming.tokens),
        merge(bags.weights, incoming.weights),
    )
