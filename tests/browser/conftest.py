"""One real stack for the browser tests: `mlflow server` and `dagster dev` on free loopback ports
over a scratch instance, the pipeline launched through Dagster's GraphQL API (the full run with
config/ci.yaml, then a re-evaluation with another seed), and the system Chromium.

Screenshots go to $HIER_SCREENSHOTS when set (CI keeps them as artifacts), else under pytest's
temporary folder (`ui*/screenshots`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.browser.chromium import Chromium, ensure_chromium
from tests.browser.servers import LOOPBACK, code_location_loaded, free_port, running, wait_for
from tests.browser.stack import LOCATION, REPO, Stack, ci_run_config, launch

BIN = Path(sys.executable).parent
SERVER_TIMEOUT_SECONDS = 300


@pytest.fixture(scope="session")
def chromium() -> Chromium:
    return ensure_chromium()


@pytest.fixture(scope="session")
def stack(chromium: Chromium, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("ui")
    screenshots = Path(os.environ.get("HIER_SCREENSHOTS") or root / "screenshots")
    screenshots.mkdir(parents=True, exist_ok=True)
    dagster_home, home = root / "dagster_home", root / "hier"
    dagster_home.mkdir()
    (home / "mlflow").mkdir(parents=True)
    (dagster_home / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
    dagster_port, mlflow_port = free_port(), free_port()
    dagster, mlflow = f"http://{LOOPBACK}:{dagster_port}", f"http://{LOOPBACK}:{mlflow_port}"
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home),
        "HIER_HOME": str(home),
        "HIER_ENV": "ci",
        "HIER_MLFLOW_UI": mlflow,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    environment.pop("MLFLOW_TRACKING_URI", None)  # the pipeline writes the sqlite store
    mlflow_command = [
        *(str(BIN / "mlflow"), "server", "--host", LOOPBACK, "--port", str(mlflow_port)),
        *("--backend-store-uri", f"sqlite:///{home / 'mlflow' / 'mlflow.db'}", "--workers", "1"),
    ]
    dagster_command = [str(BIN / "dagster"), "dev", "-h", LOOPBACK, "-p", str(dagster_port)]
    with (
        running(mlflow_command, REPO, environment, root / "mlflow.log"),
        running(dagster_command, REPO, environment, root / "dagster.log"),
    ):
        wait_for(
            lambda: requests.get(f"{mlflow}/health", timeout=5).ok,
            SERVER_TIMEOUT_SECONDS,
            "mlflow server",
            root / "mlflow.log",
        )
        wait_for(
            lambda: code_location_loaded(dagster, LOCATION),
            SERVER_TIMEOUT_SECONDS,
            "dagster dev",
            root / "dagster.log",
        )
        config = ci_run_config()
        runs = {"full_retrain_job": launch(dagster, "full_retrain_job", config)}
        # A second evaluation with another user sample: two runs of one stage to compare.
        evaluation = config["ops"]["evaluation_report"]["config"]
        second = {"ops": {"evaluation_report": {"config": {**evaluation, "seed": 1}}}}
        runs["evaluate_only_job"] = launch(dagster, "evaluate_only_job", second)
        yield Stack(dagster, mlflow, home, runs, screenshots)
