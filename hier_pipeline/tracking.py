"""MLflow tracking used by every stage: one run per stage materialisation, always closed.

Thin on purpose: MlflowClient calls with a run that ends FINISHED on success and FAILED on error,
so the MLflow UI never shows runs stuck in RUNNING.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mlflow.tracking import MlflowClient


@dataclass(frozen=True)
class TrackedRun:
    client: MlflowClient
    experiment_id: str
    run_id: str

    def log_params(self, params: Mapping[str, object]) -> None:
        for key, value in params.items():
            self.client.log_param(self.run_id, key, str(value))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """MLflow forbids '@' in names: `map@10` is logged as `map_at_10`."""
        for key, value in metrics.items():
            self.client.log_metric(self.run_id, metric_name(key), float(value), step=step)

    def log_text(self, text: str, artifact_file: str) -> None:
        self.client.log_text(self.run_id, text, artifact_file)

    def log_artifact(self, path: Path, folder: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), folder)


def metric_name(key: str) -> str:
    return key.replace("@", "_at_")


def default_artifact_location(tracking_uri: str) -> str | None:
    """Artifacts beside a sqlite store (`<folder>/artifacts`), never in the working directory."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    return (Path(tracking_uri[len(prefix) :]).parent / "artifacts").resolve().as_uri()


def experiment_id(client: MlflowClient, name: str, artifact_location: str | None = None) -> str:
    """The id of experiment `name`, created on first use."""
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return str(experiment.experiment_id)
    return str(client.create_experiment(name, artifact_location=artifact_location))


@contextmanager
def tracked_run(
    tracking_uri: str, experiment: str, run_name: str, tags: Mapping[str, str] | None = None
) -> Iterator[TrackedRun]:
    """Open an MLflow run; it ends FINISHED when the block succeeds and FAILED when it raises."""
    client = MlflowClient(tracking_uri=tracking_uri)
    experiment_key = experiment_id(client, experiment, default_artifact_location(tracking_uri))
    run = client.create_run(experiment_key, run_name=run_name, tags=dict(tags or {}))
    tracked = TrackedRun(client, experiment_key, run.info.run_id)
    try:
        yield tracked
    except BaseException:
        client.set_terminated(run.info.run_id, status="FAILED")
        raise
    client.set_terminated(run.info.run_id, status="FINISHED")
