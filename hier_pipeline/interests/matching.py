"""Token ids that survive a retrain: each primitive of a new tree takes the id of the old
primitive that means the same, so that what downstream users stored (`L1:07.3` in a feature
store, a campaign's targeting) keeps pointing at the same interest.

Meaning is membership, not position: the embedding space of a retrained model is another space,
so centroids cannot be compared across trees, but the items under a primitive can. Matching runs
top-down: the level-0 primitives are paired with the old ones by the Hungarian algorithm on the
Jaccard overlap of their items (by key); a child may only take the id of a child of the old
primitive its parent matched, so ids stay paths. A pair overlapping less than `min_overlap` is no
match: the new primitive gets a fresh rank under its parent, never a retired id.

A retrain's tree is refitted from the serving one (`serving_members`, `growth.warm_labels`) so
that most primitives keep their items, and so their ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from hier_pipeline.interests.artifact import TOKENS_FILE, load_hierarchy, load_tokens
from hier_pipeline.interests.hierarchy import InterestHierarchy


def stable_token_ids(
    old: InterestHierarchy,
    old_keys: list[str],
    new: InterestHierarchy,
    new_keys: list[str],
    min_overlap: float = 0.5,
) -> list[str]:
    """Token ids for `new`'s primitives (in its order): an old id where a primitive of `old` holds
    mostly the same items (`*_keys`: the item keys in each tree's member order), else fresh."""
    position = {key: i for i, key in enumerate(old_keys)}
    shared = [(i, position[k]) for i, k in enumerate(new_keys) if k in position]
    new_rows = torch.tensor([i for i, _ in shared], dtype=torch.long)
    old_rows = torch.tensor([j for _, j in shared], dtype=torch.long)
    old_index = {token: t for t, token in enumerate(old.token_ids)}
    ids = [""] * len(new.parent)
    for level in range(new.levels):
        overlap = _jaccard(old, new, level, old_rows, new_rows)
        new_span, old_span = new.level(level), old.level(level)
        for parent in sorted({int(p) for p in new.parent[new_span]}):
            children = [t for t in range(new_span.start, new_span.stop) if new.parent[t] == parent]
            old_parent = old_index.get(ids[parent], -2) if parent >= 0 else -1
            siblings = [
                t for t in range(old_span.start, old_span.stop) if old.parent[t] == old_parent
            ]
            scores = overlap[
                np.ix_(
                    [c - new_span.start for c in children], [s - old_span.start for s in siblings]
                )
            ]
            rows, cols = linear_sum_assignment(-scores) if siblings else ([], [])
            taken = {children[r]: siblings[c] for r, c in zip(rows, cols, strict=True)}
            taken = {
                n: o
                for n, o in taken.items()
                if overlap[n - new_span.start, o - old_span.start] >= min_overlap
            }
            for child, source in taken.items():
                ids[child] = old.token_ids[source]
            ranks = [_rank(old.token_ids[s]) for s in siblings]
            width = max((len(r) for r in ranks), default=1)
            fresh = max((int(r) for r in ranks), default=-1) + 1
            prefix = "" if parent < 0 else ids[parent].split(":", 1)[1] + "."
            for child in children:
                if child not in taken:
                    width = max(width, len(str(fresh)))
                    ids[child] = f"L{level}:{prefix}{fresh:0{width}d}"
                    fresh += 1
    return ids


def _rank(token: str) -> str:
    """The last part of a path id: `L2:07.3.12` -> `12`."""
    return token.split(":", 1)[1].rsplit(".", 1)[-1]


def _jaccard(
    old: InterestHierarchy, new: InterestHierarchy, level: int, old_rows: Tensor, new_rows: Tensor
) -> np.ndarray:
    """[new primitives of the level, old primitives of the level]: |shared items| / |union|,
    the union counting every item of either tree (an item only one tree has dilutes the pair)."""
    n_new, n_old = new.primitives_per_level()[level], old.primitives_per_level()[level]
    new_local = new.members[:, level] - new.offsets[level]
    old_local = old.members[:, level] - old.offsets[level]
    pairs = new_local[new_rows] * n_old + old_local[old_rows]
    inter = torch.bincount(pairs, minlength=n_new * n_old).view(n_new, n_old).double()
    size_new = torch.bincount(new_local, minlength=n_new).double()
    size_old = torch.bincount(old_local, minlength=n_old).double()
    union = size_new[:, None] + size_old[None, :] - inter
    return (inter / union.clamp_min(1)).numpy()


def serving_members(old: InterestHierarchy, old_keys: list[str], keys: list[str]) -> Tensor:
    """Each item's primitives in the serving tree `old` (`old_keys`: its items' keys in member
    order), by key; -1 rows for items it did not have: where a retrain's tree starts from
    (`build_hierarchy(previous=...)`). Shapes: -> [len(keys), old levels]."""
    position = {key: i for i, key in enumerate(old_keys)}
    rows = torch.tensor([position.get(key, -1) for key in keys], dtype=torch.long)
    members = torch.full((len(keys), old.levels), -1, dtype=torch.long)
    members[rows >= 0] = old.members[rows[rows >= 0]]
    return members


@dataclass(frozen=True)
class ServingTree:
    """Where a retrain's tree starts from: each item's primitives in the served tree
    (`serving_members`) and the content modalities its finest codes read (None: a tree from
    before trees kept them), so the refit fuses the items as the served tree did."""

    members: Tensor
    modalities: tuple[str, ...] | None


def load_serving_tree(
    folder: Path, item_type: str, keys: list[str], vectors: Mapping[str, Tensor]
) -> ServingTree | None:
    """The tree released in `folder` (a stage or serving folder with tokens), as a retrain over
    the items `keys` starts from it; None where nothing is served yet, or where the served tree
    came from these very embeddings (`vectors`, node type -> [n, d]): without a retrain there is
    nothing to refit, and the tree grows again exactly as the served one did (so
    rematerialising changes nothing)."""
    if not (folder / TOKENS_FILE).is_file():
        return None
    tokens = load_tokens(folder / TOKENS_FILE)
    served = tokens.vectors()
    if served.keys() == vectors.keys() and all(torch.equal(served[t], vectors[t]) for t in vectors):
        return None
    tree = load_hierarchy(tokens.hierarchy)
    return ServingTree(serving_members(tree, tokens.keys[item_type], keys), tree.modalities)
