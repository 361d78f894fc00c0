"""The pipeline launched on a running `dagster dev` through its GraphQL API, exactly as the UI's
launchpad does, and what the browser tests need to know about it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.browser.servers import graphql

REPO = Path(__file__).resolve().parents[2]
LOCATION = "hier_pipeline"
RUN_TIMEOUT_SECONDS = 45 * 60  # the CI-scale pipeline on one busy core took about 15 minutes

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
STATUS = "query Status($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
FINAL = {"SUCCESS", "FAILURE", "CANCELED"}


@dataclass(frozen=True)
class Stack:
    dagster: str
    mlflow: str
    home: Path  # HIER_HOME of the pipeline
    runs: dict[str, str]  # job name -> Dagster run id (each succeeded)
    screenshots: Path


def ci_run_config() -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "config" / "ci.yaml").read_text()))


def launch(url: str, job: str, run_config: dict[str, Any]) -> str:
    """Launch `job` as the launchpad does and wait for it to end; return its run id."""
    params = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": "__repository__",
            "jobName": job,
        },
        "runConfigData": run_config,
        "mode": "default",
    }
    result = graphql(url, LAUNCH, {"params": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    run_id = str(result["run"]["runId"])
    deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
    status = ""
    while time.monotonic() < deadline:
        status = graphql(url, STATUS, {"id": run_id})["runOrError"]["status"]
        if status in FINAL:
            break
        time.sleep(5)
    assert status == "SUCCESS", f"{job} run {run_id} ended {status or 'not in time'}"
    return run_id
