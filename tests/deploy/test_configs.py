"""The scale-out files in deploy/ stay loadable and in step with the local instance: Dagster's own
schema accepts each instance file, the DuckDB writer pool and retries match ../dagster.yaml, and
the DDP job calls `hier train` with flags it has."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from dagster._core.instance.config import dagster_instance_config

from hier_pipeline.cli import main

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
INSTANCES = ["dagster-postgres.yaml", "dagster-k8s.yaml"]


@pytest.mark.parametrize("name", INSTANCES)
def test_instance_file_is_valid_and_keeps_the_local_pools_and_retries(name: str) -> None:
    config, _ = dagster_instance_config(str(DEPLOY), name)
    local = yaml.safe_load((REPO / "dagster.yaml").read_text())
    assert "postgres" in config["storage"]
    assert config["concurrency"]["pools"] == local["concurrency"]["pools"]
    assert config["run_retries"] == local["run_retries"]


def test_k8s_instance_launches_runs_in_pods_with_the_pipeline_settings() -> None:
    config, _ = dagster_instance_config(str(DEPLOY), "dagster-k8s.yaml")
    launcher = config["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    names = {item.split("=", 1)[0] for item in launcher["config"]["env_vars"]}
    # what assets/definitions.py and hier_pipeline/files/home.py read
    assert {"HIER_HOME", "HIER_DATASET", "MLFLOW_TRACKING_URI"} <= names


def test_ddp_job_runs_hier_train_with_flags_it_has(capsys: pytest.CaptureFixture[str]) -> None:
    job = yaml.safe_load((DEPLOY / "k8s" / "train-ddp.yaml").read_text())
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[0] == "torchrun"
    module = command.index("-m")
    assert command[module + 1 : module + 3] == ["hier_pipeline.cli", "train"]
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    known = {word.strip(",[]") for word in capsys.readouterr().out.split()}
    assert {arg for arg in command[module + 3 :] if arg.startswith("--")} <= known
