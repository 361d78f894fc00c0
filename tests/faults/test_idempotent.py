"""Re-materialising every stage with the same inputs and seed gives the same outputs: the same
tables, tensors, vocabulary and metrics, file by file, named by the asset that wrote them.

Tensors are compared loaded, not as bytes: `torch.save` names its archive after the temporary
file `atomic_path` writes, so equal payloads differ in a few header bytes.

Both runs use one torch thread. With several, torch's CPU kernels split float sums across threads
in an order that can vary from run to run, so weights drift in the last bits and a token near a
tie can flip (seen on 2 threads: the model's weights differed, then the bags' weights); on one
thread every output is bit-identical. The resume tests pin one thread for the same reason.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from hier_pipeline.dataset.sql import open_database
from tests.assets.materialise import materialise

REPO = Path(__file__).resolve().parents[2]

# What each asset writes under the storage root (the synthetic world is named synthetic_ads).
OUTPUTS = {
    "raw_tables": ["warehouse/synthetic_ads.duckdb"],
    "relational_graph": ["graphs/synthetic_ads.pt"],
    "content_embeddings": ["content/synthetic_ads.pt"],
    "interest_model": ["models/synthetic_ads.pt"],
    "entity_embeddings": ["embeddings/synthetic_ads.pt"],
    "interest_hierarchy": ["interests/synthetic_ads/hierarchy.pt"],
    "interest_tokens": [
        "interests/synthetic_ads/tokens.pt",
        "interests/synthetic_ads/vocabulary.parquet",
    ],
    "evaluation_report": ["evaluation/synthetic_ads/metrics.json"],
    "promoted_interests": [
        f"serving/synthetic_ads/{name}"
        for name in ("tokens.pt", "embeddings.pt", "hierarchy.pt", "vocabulary.parquet", "model.pt")
    ]
    + ["serving/synthetic_ads/manifest.json"],
}

# The only fields that legitimately change between runs: wall-clock seconds per evaluated model,
# and the ids of the Dagster run that released and of the model's MLflow run (the manifest's
# lineage).
VOLATILE = {"metrics.json": ("seconds",), "manifest.json": ("dagster_run", "model_run")}


def _run_config() -> dict[str, Any]:
    """config/ci.yaml, evaluated against popularity only: the gate needs no other baseline."""
    config: dict[str, Any] = yaml.safe_load((REPO / "config" / "ci.yaml").read_text())
    config["ops"]["evaluation_report"]["config"] |= {"ablations": [], "baselines": ["popularity"]}
    return config


def _content(path: Path) -> Any:
    """What a reader of `path` sees, in a form `==` can compare."""
    if path.suffix == ".pt":
        return torch.load(path, weights_only=True)
    if path.suffix == ".json":
        document = json.loads(path.read_text())
        for key in VOLATILE.get(path.name, ()):
            document.pop(key, None)
        return document
    if path.suffix == ".duckdb":
        with open_database(path) as connection:
            tables = connection.execute(
                "SELECT table_schema, table_name FROM information_schema.tables ORDER BY ALL"
            ).fetchall()
            return {
                f"{schema}.{name}": connection.execute(
                    f'SELECT * FROM "{schema}"."{name}" ORDER BY ALL'
                ).fetchall()
                for schema, name in tables
            }
    return hashlib.sha256(path.read_bytes()).hexdigest()  # parquet: deterministic bytes


def _differences(left: Any, right: Any, where: str = "") -> list[str]:
    """Where `left` and `right` differ (tensors exactly, NaN equal to NaN)."""
    if isinstance(left, torch.Tensor):
        same = isinstance(right, torch.Tensor) and left.dtype == right.dtype
        return [] if same and torch.equal(left, right) else [where]
    if isinstance(left, dict) and isinstance(right, dict):
        if left.keys() != right.keys():
            return [f"{where} keys {sorted(left.keys() ^ right.keys())}"]
        return [d for key in left for d in _differences(left[key], right[key], f"{where}/{key}")]
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        if len(left) != len(right):
            return [f"{where} length {len(left)} != {len(right)}"]
        pairs = enumerate(zip(left, right, strict=True))
        return [d for i, (a, b) in pairs for d in _differences(a, b, f"{where}[{i}]")]
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return [] if math.isnan(right) else [f"{where}: nan != {right!r}"]
    return [] if left == right else [f"{where}: {left!r} != {right!r}"]


def _outputs(home: Path) -> dict[str, dict[str, Any]]:
    return {asset: {p: _content(home / p) for p in paths} for asset, paths in OUTPUTS.items()}


@pytest.fixture
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
def test_rematerialising_with_the_same_inputs_and_seed_changes_no_output(
    synthetic_world: Path, tmp_path: Path
) -> None:
    stages = list(OUTPUTS)
    assert materialise(stages, synthetic_world, tmp_path, _run_config()).success
    first = _outputs(tmp_path)
    assert materialise(stages, synthetic_world, tmp_path, _run_config()).success
    second = _outputs(tmp_path)
    differing = {
        asset: found
        for asset in OUTPUTS
        if (found := _differences(first[asset], second[asset], asset))
    }
    assert not differing, differing
