"""The one serving folder, `<home>/serving/<dataset>/`: what `hier interests` answers from and
what arriving batches are fitted into. It is self-contained (the model checkpoint beside the
tokens, vocabulary, tree and embeddings, and a manifest with the scores it was released on), so
re-materialising upstream assets never changes what is served until the next release. A release
is written beside the old folder and swapped in by renames: a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from hier_pipeline.files.atomic import atomic_path, write_atomically
from hier_pipeline.interests.artifact import (
    HIERARCHY_FILE,
    TOKENS_FILE,
    TokensArtifact,
    find_interest_folder,
    save_tokens,
)

SERVING = "serving"
MODEL_FILE = "model.pt"
EMBEDDINGS_FILE = "embeddings.pt"
MANIFEST_FILE = "manifest.json"


def serving_folder(home: Path, dataset: str) -> Path:
    return home / SERVING / dataset


def find_serving_folder(home: Path, dataset: str | None = None) -> Path:
    """What answers queries: the serving folder (with the batches fitted into it since), or the
    interests stage's folder where nothing was released yet."""
    stage = find_interest_folder(home, dataset)
    served = serving_folder(home, stage.name)
    return served if (served / TOKENS_FILE).is_file() else stage


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of what `folder` serves; None where nothing complete is served there."""
    path = folder / MANIFEST_FILE
    if not (path.is_file() and (folder / MODEL_FILE).is_file()):
        return None
    manifest: dict[str, Any] = json.loads(path.read_text())
    return manifest


def write_release(
    tokens: TokensArtifact, model: Path, folder: Path, manifest: dict[str, Any]
) -> TokensArtifact:
    """Copy the model, tokens, vocabulary, tree and embeddings into `folder` (the tokens pointing
    at the copies) and write `manifest` (what was evaluated, how it scored) beside them."""
    loaded = tokens.load()
    folder.mkdir(parents=True, exist_ok=True)
    embeddings, hierarchy = folder / EMBEDDINGS_FILE, folder / HIERARCHY_FILE
    _copy(loaded.embeddings, embeddings)
    _copy(loaded.hierarchy, hierarchy)
    _copy(model, folder / MODEL_FILE)
    released = save_tokens(
        replace(loaded, embeddings=embeddings, hierarchy=hierarchy),
        tokens.vocabulary(),
        folder,
        tokens.usage,
    )
    write_atomically(folder / MANIFEST_FILE, json.dumps(manifest, indent=2))
    return released


def swap_in(staging: Path, folder: Path) -> None:
    """`staging` becomes `folder` by renames; the old folder (and its batch files, which index
    the old tree) goes."""
    retired = folder.with_name(f".{folder.name}.retired")
    shutil.rmtree(retired, ignore_errors=True)
    if folder.exists():
        os.replace(folder, retired)
    os.replace(staging, folder)
    shutil.rmtree(retired, ignore_errors=True)


def _copy(source: Path, target: Path) -> None:
    with atomic_path(target) as partial:
        shutil.copyfile(source, partial)
