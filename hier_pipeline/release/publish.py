"""Publishing interest tokens: the self-contained copy that serving reads, made only for a model
that passed its evaluation (the gate is Dagster's: see `published_tokens` in assets/evaluation.py).

A published folder opens with `InterestIndex.open` like the interests stage's own folder, but
holds its own copies of the embeddings and the tree: re-materialising upstream assets never
changes what is served until the next publication.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from hier_pipeline.files.atomic import atomic_path, write_atomically
from hier_pipeline.interests.artifact import HIERARCHY_FILE, TokensArtifact, save_tokens

EMBEDDINGS_FILE = "embeddings.pt"
MANIFEST_FILE = "manifest.json"


def publish_tokens(
    tokens: TokensArtifact, folder: Path, manifest: dict[str, Any]
) -> TokensArtifact:
    """Copy the tokens, vocabulary, tree and embeddings into `folder`, the tokens pointing at the
    copies, and write `manifest` (what was evaluated, how it scored) beside them."""
    loaded = tokens.load()
    folder.mkdir(parents=True, exist_ok=True)
    embeddings, hierarchy = folder / EMBEDDINGS_FILE, folder / HIERARCHY_FILE
    _copy(loaded.embeddings, embeddings)
    _copy(loaded.hierarchy, hierarchy)
    published = save_tokens(
        replace(loaded, embeddings=embeddings, hierarchy=hierarchy),
        tokens.vocabulary(),
        folder,
        tokens.usage,
    )
    write_atomically(folder / MANIFEST_FILE, json.dumps(manifest, indent=2))
    return published


def _copy(source: Path, target: Path) -> None:
    with atomic_path(target) as partial:
        shutil.copyfile(source, partial)
