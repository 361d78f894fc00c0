"""Session-wide datasets: generated or sliced once, reused read-only by every test that needs them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.builders import SHARED_DATASETS, completejourney_slice

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


@pytest.fixture(scope="session")
def synthetic_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded default world at a tiny scale (every kind of row, a few hundred entities)."""
    from hier_pipeline.synthetic import SyntheticConfig, generate_world

    return generate_world(tmp_path_factory.mktemp("world"), SyntheticConfig(scale=0.05, seed=0))


@pytest.fixture(scope="session")
def completejourney(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A slice of the real Complete Journey dataset from ../shared (skipped where it is absent)."""
    if not (SHARED_DATASETS / "completejourney" / "dataset.yaml").is_file():
        pytest.skip(f"the Complete Journey files are not at {SHARED_DATASETS / 'completejourney'}")
    return completejourney_slice(tmp_path_factory.mktemp("completejourney"))


@pytest.fixture(scope="session")
def synthetic_pipeline(
    synthetic_world: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[object, dict, object]:
    """(graph, content vectors, split) of the tiny synthetic world, built once for model tests."""
    from hier_pipeline.pipeline.prepare import prepare

    folder = tmp_path_factory.mktemp("pipeline")
    prepared = prepare(synthetic_world, folder, folder / "cache")
    return prepared.graph, prepared.content, prepared.split
