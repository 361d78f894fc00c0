"""MLflow runs on a real sqlite tracking store: metrics land, and runs always end."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from resources import MLflowResource

REPO = Path(__file__).resolve().parents[1]


def test_run_logs_and_finishes(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    resource = MLflowResource(tracking_uri=uri, experiment="tests")
    with resource.run("load", tags={"dataset": "tiny"}) as run:
        run.log_params({"scale": 0.05})
        run.log_metrics({"rows": 10}, step=0)
        run.log_metrics({"rows": 12}, step=1)
    client = MlflowClient(tracking_uri=uri)
    stored = client.get_run(run.run_id)
    assert stored.info.status == "FINISHED"
    assert stored.data.params == {"scale": "0.05"}
    assert [m.value for m in client.get_metric_history(run.run_id, "rows")] == [10, 12]
    assert stored.data.tags["dataset"] == "tiny"
    assert resource.run_url(run).endswith(f"/runs/{run.run_id}")
    artifact = tmp_path / "report.md"
    artifact.write_text("# report")
    run.log_artifact(artifact, "reports")
    assert (tmp_path / "artifacts" / run.run_id / "artifacts" / "reports" / "report.md").is_file()


def test_run_is_marked_failed_when_the_stage_raises(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    resource = MLflowResource(tracking_uri=uri, experiment="tests")
    with pytest.raises(RuntimeError), resource.run("train") as run:
        raise RuntimeError("boom")
    assert MlflowClient(tracking_uri=uri).get_run(run.run_id).info.status == "FAILED"


def test_run_is_named_and_tagged_by_stage_dataset_commit_and_config(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    resource = MLflowResource(tracking_uri=uri, experiment="tests")
    with resource.run("train", tags={"dataset": "tiny"}, params={"dim": 64, "seed": 0}) as first:
        pass
    with resource.run("train", tags={"dataset": "tiny"}, params={"dim": 64, "seed": 1}) as second:
        pass
    client = MlflowClient(tracking_uri=uri)
    runs = [client.get_run(run.run_id) for run in (first, second)]
    hashes = [run.data.tags["config_hash"] for run in runs]
    assert hashes[0] != hashes[1]
    assert [run.info.run_name for run in runs] == [f"train-tiny-{h[:8]}" for h in hashes]
    assert runs[0].data.params == {"dim": "64", "seed": "0"}
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    for run in runs:
        assert run.data.tags["stage"] == "train"
        assert run.data.tags["git_commit"] == run.data.tags["mlflow.source.git.commit"] == commit
