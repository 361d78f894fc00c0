"""MLflow, configured per environment; local default is a sqlite store under $HIER_HOME."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import dagster as dg
from pydantic import Field

from hier_pipeline.files.home import default_home
from hier_pipeline.tracking import TrackedRun, tracked_run

UI_URL = "http://127.0.0.1:5000"  # where `make mlflow` serves the UI


class MLflowResource(dg.ConfigurableResource):
    """A configurable wrapper around MlflowClient (dagster-mlflow's resource is not configurable
    and leaves runs RUNNING)."""

    tracking_uri: str = Field(
        default="", description="MLflow tracking URI; empty: sqlite under $HIER_HOME/mlflow"
    )
    experiment: str = Field(default="hier-pipeline", description="MLflow experiment name")
    ui_url: str = Field(
        default=UI_URL, description="the MLflow UI that run links in the Dagster UI point to"
    )

    def uri(self) -> str:
        if self.tracking_uri:
            return self.tracking_uri
        folder = default_home() / "mlflow"
        folder.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{folder / 'mlflow.db'}"

    @contextmanager
    def run(
        self,
        stage: str,
        tags: Mapping[str, str] | None = None,
        params: Mapping[str, object] | None = None,
    ) -> Iterator[TrackedRun]:
        """A run named `<stage>-<dataset tag>-<config hash>`, tagged with the commit."""
        with tracked_run(self.uri(), self.experiment, stage, tags, params) as run:
            yield run

    def run_url(self, run: TrackedRun) -> str:
        return f"{self.ui_url}/#/experiments/{run.experiment_id}/runs/{run.run_id}"

    def model_url(self, name: str, version: str) -> str:
        return f"{self.ui_url}/#/models/{name}/versions/{version}"
