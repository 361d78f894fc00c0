"""One way to materialise assets in tests: real resources pointed at a dataset and a scratch home."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from assets.definitions import defs
from resources import DatasetResource, MLflowResource, StorageResource


def materialise(
    stages: Sequence[str], dataset: Path, home: Path, run_config: dict[str, Any] | None = None
) -> dg.ExecuteInProcessResult:
    """Materialise `stages` (asset names) with every asset check of the code location."""
    return dg.materialize(
        [*(defs.get_assets_def(name) for name in stages), *(defs.asset_checks or [])],
        resources={
            "dataset": DatasetResource(source=str(dataset)),
            "storage": StorageResource(root=str(home)),
            "mlflow": MLflowResource(
                tracking_uri=f"sqlite:///{home / 'mlflow.db'}", experiment="tests"
            ),
        },
        run_config=run_config,
        instance=dg.DagsterInstance.ephemeral(),
    )
