"""The interests stage's outputs as files: the hierarchy with its super-graph, and the tokens with
their vocabulary. Plain tensors, strings and numbers (`torch.load(weights_only=True)`) and
parquet, each written atomically."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor

from hier_pipeline.files.atomic import atomic_path
from hier_pipeline.interests.codebook import ItemCodebook
from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.supergraph import SuperGraph
from hier_pipeline.interests.tokens import TokenBags

# One folder per dataset, `<home>/interests/<dataset>/`, holds the stage's files.
HIERARCHY_FILE = "hierarchy.pt"
TOKENS_FILE = "tokens.pt"
VOCABULARY_FILE = "vocabulary.parquet"
MAP_FILE = "primitives.png"


def interest_folder(home: Path, dataset: str) -> Path:
    return home / "interests" / dataset


def find_interest_folder(home: Path, dataset: str | None = None) -> Path:
    """The stage folder of `dataset`, or of the only dataset with tokens under `home`."""
    found = sorted(p.parent.name for p in (home / "interests").glob(f"*/{TOKENS_FILE}"))
    if dataset is None and len(found) == 1:
        dataset = found[0]
    if dataset is None or dataset not in found:
        wanted = f"for dataset '{dataset}' " if dataset else ""
        choices = f" (found: {', '.join(found)}; pick one with --dataset)" if found else ""
        raise FileNotFoundError(
            f"no interest tokens {wanted}under {home}: materialise interest_tokens first{choices}"
        )
    return interest_folder(home, dataset)


@dataclass(frozen=True)
class HierarchyArtifact:
    path: Path
    primitives_per_level: tuple[int, ...]  # coarse -> fine
    supergraph_stats: list[dict[str, float]]  # per level, see `supergraph_stats`
    stability: list[dict[str, float]]  # per level NMI/ARI against a tree from the next seed
    merge_share: float | None = None  # `InterestHierarchy.merge_share`
    modalities: tuple[str, ...] | None = None  # `InterestHierarchy.modalities`

    def load(self) -> InterestHierarchy:
        return load_hierarchy(self.path)

    def supergraph(self) -> SuperGraph:
        return SuperGraph(**torch.load(self.path, weights_only=True)["supergraph"])


def load_hierarchy(path: Path) -> InterestHierarchy:
    payload = torch.load(path, weights_only=True)["hierarchy"]
    return InterestHierarchy(
        payload["centroids"],
        payload["parent"],
        tuple(payload["offsets"]),
        payload["token_ids"],
        payload["members"],
        None if payload.get("codebook") is None else ItemCodebook.from_payload(payload["codebook"]),
        payload.get("merge_share"),
    )


def save_hierarchy(
    hierarchy: InterestHierarchy,
    supergraph: SuperGraph,
    path: Path,
    stats: list[dict[str, float]],
    stability: list[dict[str, float]],
) -> HierarchyArtifact:
    _save(
        {
            "hierarchy": {
                "centroids": hierarchy.centroids,
                "parent": hierarchy.parent,
                "offsets": list(hierarchy.offsets),
                "token_ids": hierarchy.token_ids,
                "members": hierarchy.members,
                "codebook": None if hierarchy.codebook is None else hierarchy.codebook.to_payload(),
                "merge_share": hierarchy.merge_share,
            },
            "supergraph": vars(supergraph),
        },
        path,
    )
    return HierarchyArtifact(
        path,
        hierarchy.primitives_per_level(),
        stats,
        stability,
        hierarchy.merge_share,
        hierarchy.modalities,
    )


@dataclass(frozen=True)
class Tokens:
    """Bags per entity type, the entities' keys in node order, which type plays which role
    ("user", "item", "advertiser"), the embeddings and hierarchy the bags came from, and each
    item's engagement mass (`prior.engagement_mass`; None in files written before it)."""

    bags: dict[str, TokenBags]
    keys: dict[str, list[str]]
    roles: dict[str, str]
    embeddings: Path
    hierarchy: Path
    item_mass: Tensor | None = None

    def vectors(self) -> dict[str, Tensor]:
        """The entity embeddings (node type -> [N, dim]) from the file `embed_entities` wrote;
        read here without the model package, so that queries start fast."""
        vectors: dict[str, Tensor] = torch.load(self.embeddings, weights_only=True)["embeddings"]
        return vectors


@dataclass(frozen=True)
class TokensArtifact:
    path: Path
    vocabulary_path: Path
    counts: dict[str, int]  # entity type -> entities
    usage: list[dict[str, float]]  # per level, see `usage_stats`

    def load(self) -> Tokens:
        return load_tokens(self.path)

    def vocabulary(self) -> pd.DataFrame:
        return pd.read_parquet(self.vocabulary_path)


def load_tokens(path: Path) -> Tokens:
    payload = torch.load(path, weights_only=True)
    return Tokens(
        {node_type: TokenBags(**tensors) for node_type, tensors in payload["bags"].items()},
        payload["keys"],
        payload["roles"],
        (path.parent / payload["embeddings"]).resolve(),
        (path.parent / payload["hierarchy"]).resolve(),
        payload.get("item_mass"),
    )


def save_tokens(
    tokens: Tokens, vocabulary: pd.DataFrame, folder: Path, usage: list[dict[str, float]]
) -> TokensArtifact:
    """`folder/tokens.pt` and `folder/vocabulary.parquet`. The input files are referenced relative
    to the folder, so a moved output folder still opens."""
    path, vocabulary_path = folder / TOKENS_FILE, folder / VOCABULARY_FILE
    _save(
        {
            "bags": {node_type: vars(bag) for node_type, bag in tokens.bags.items()},
            "keys": tokens.keys,
            "roles": tokens.roles,
            "embeddings": os.path.relpath(tokens.embeddings, folder),
            "hierarchy": os.path.relpath(tokens.hierarchy, folder),
            "item_mass": tokens.item_mass,
        },
        path,
    )
    with atomic_path(vocabulary_path) as partial:
        vocabulary.to_parquet(partial, index=False)
    return TokensArtifact(path, vocabulary_path, {t: len(b) for t, b in tokens.bags.items()}, usage)


def _save(payload: dict[str, Any], path: Path) -> None:
    with atomic_path(path) as partial:
        torch.save(payload, partial)
