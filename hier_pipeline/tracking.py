"""MLflow tracking used by every stage: one run per stage materialisation, always closed.

Thin on purpose: MlflowClient calls with a run that ends FINISHED on success and FAILED on error,
so the MLflow UI never shows runs stuck in RUNNING. A tracking server that cannot be reached stops
the stage before its body runs (so before it writes anything), within seconds and with a message
that names the server, instead of after MLflow's minutes of retries.

Runs launched at once on one sqlite store queue for opening their runs: MLflow creates the schema
and the experiment on first use without a transaction around either, so two fresh runs racing
there fail with `table runs already exists` or a duplicate experiment. Once open, sqlite's own
busy wait serialises their short metric writes.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from hier_pipeline.config_hash import config_hash
from hier_pipeline.files.lock import exclusive_lock

CONNECT_TIMEOUT_SECONDS = 5.0
GIT_COMMIT_ENV = "HIER_GIT_COMMIT"  # set in images built without .git (deploy/)


class TrackingUnavailable(RuntimeError):
    """The MLflow tracking store cannot be used; the stage did not start."""


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


def flatten_params(values: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """Nested config dicts as MLflow params: `{"model": {"dim": 64}}` -> `{"model.dim": 64}`."""
    flat: dict[str, object] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def git_commit() -> str | None:
    """The commit of the checkout this code runs from ($HIER_GIT_COMMIT wins; None outside git)."""
    if os.environ.get(GIT_COMMIT_ENV):
        return os.environ[GIT_COMMIT_ENV]
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def run_identity(
    stage: str, tags: Mapping[str, str], params: Mapping[str, object] | None
) -> tuple[str, dict[str, str]]:
    """The run's name and tags. The name `<stage>-<dataset>-<config hash>` tells runs apart in
    the compare view; the tags carry the stage, the commit (also as MLflow's own source tag, which
    its UI shows) and the config hash."""
    identity = {"stage": stage, **tags}
    commit = git_commit()
    if commit:
        identity |= {"git_commit": commit, "mlflow.source.git.commit": commit}
    parts = [stage]
    if "dataset" in tags:
        parts.append(tags["dataset"])
    if params is not None:
        identity["config_hash"] = config_hash(params)
        parts.append(identity["config_hash"][:8])
    return "-".join(parts), identity


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a `sqlite:///` store; None for any other store."""
    prefix = "sqlite:///"
    return Path(tracking_uri[len(prefix) :]) if tracking_uri.startswith(prefix) else None


def default_artifact_location(tracking_uri: str) -> str | None:
    """Artifacts beside a sqlite store (`<folder>/artifacts`), never in the working directory."""
    database = sqlite_path(tracking_uri)
    return None if database is None else (database.parent / "artifacts").resolve().as_uri()


def experiment_id(client: MlflowClient, name: str, artifact_location: str | None = None) -> str:
    """The id of experiment `name`, created on first use."""
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return str(experiment.experiment_id)
    return str(client.create_experiment(name, artifact_location=artifact_location))


def check_reachable(tracking_uri: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
    """Raise `TrackingUnavailable` when an http(s) tracking server does not accept a connection.

    One TCP connect with a timeout: MLflow's client would retry with backoff for minutes and then
    fail with a message that does not say which server. Other stores (sqlite, files) are local.
    """
    parts = urlsplit(tracking_uri)
    if parts.scheme not in ("http", "https"):
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
            pass
    except OSError as error:
        raise TrackingUnavailable(
            f"the MLflow tracking server {_without_credentials(tracking_uri)} is unreachable"
            f" ({error}): start it (`make mlflow`) or point MLflowResource.tracking_uri elsewhere"
        ) from error


@contextmanager
def tracked_run(
    tracking_uri: str,
    experiment: str,
    stage: str,
    tags: Mapping[str, str] | None = None,
    params: Mapping[str, object] | None = None,
) -> Iterator[TrackedRun]:
    """Open an MLflow run for `stage`; it ends FINISHED when the block succeeds and FAILED when
    it raises. `params` (flat) are logged and hashed into the run's name and tags.

    Raises `TrackingUnavailable` before the block runs when the store cannot be reached.
    """
    check_reachable(tracking_uri)
    run_name, run_tags = run_identity(stage, tags or {}, params)
    database = sqlite_path(tracking_uri)
    try:
        with exclusive_lock(database, wait=True) if database else nullcontext():
            client = MlflowClient(tracking_uri=tracking_uri)  # creates a new store's schema
            location = default_artifact_location(tracking_uri)
            experiment_key = experiment_id(client, experiment, location)
            run = client.create_run(experiment_key, run_name=run_name, tags=run_tags)
    except MlflowException as error:
        raise TrackingUnavailable(
            f"the MLflow tracking store {_without_credentials(tracking_uri)} refused to open a run:"
            f" {error.message}"
        ) from error
    tracked = TrackedRun(client, experiment_key, run.info.run_id)
    try:
        tracked.log_params(params or {})
        yield tracked
    except BaseException as error:
        try:
            client.set_terminated(run.info.run_id, status="FAILED")
        except MlflowException as tracking_error:  # the stage's own error matters more
            error.add_note(f"MLflow run {run.info.run_id} not marked FAILED: {tracking_error}")
        raise
    client.set_terminated(run.info.run_id, status="FINISHED")


def _without_credentials(tracking_uri: str) -> str:
    """The URI as it may appear in a message: no `user:password@`."""
    parts = urlsplit(tracking_uri)
    if parts.username is None and parts.password is None:
        return tracking_uri
    host = parts.hostname or ""
    return parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host).geturl()
