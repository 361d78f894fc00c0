"""Two runs launched at once on one fresh sqlite MLflow store: both open, log and finish, and the
store reads back whole. Without the lock in `tracked_run`, one of them used to die creating the
schema MLflow creates on first use (`table runs already exists`)."""

from __future__ import annotations

import multiprocessing
import traceback
from multiprocessing.synchronize import Barrier
from pathlib import Path

from mlflow.tracking import MlflowClient

from hier_pipeline.tracking import tracked_run

SPAWN = multiprocessing.get_context("spawn")  # a fresh interpreter, as a second run would be
STEPS = 20


def _stage(uri: str, name: str, start: Barrier, outcomes: multiprocessing.Queue) -> None:
    start.wait(60)
    try:
        with tracked_run(uri, "tests", name, tags={"dataset": "tiny"}, params={"seed": 0}) as run:
            for step in range(STEPS):
                run.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
            run.log_text(f"report of {name}", "report.md")
        outcomes.put((name, run.run_id))
    except BaseException:
        outcomes.put((name, traceback.format_exc()))


def test_runs_launched_together_on_a_fresh_store_both_finish(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    start, outcomes = SPAWN.Barrier(2), SPAWN.Queue()
    runs = [SPAWN.Process(target=_stage, args=(uri, n, start, outcomes)) for n in ("a", "b")]
    for run in runs:
        run.start()
    for run in runs:
        run.join(120)
    finished = dict(outcomes.get(timeout=5) for _ in runs)
    client = MlflowClient(tracking_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "tests"]
    for name, run_id in finished.items():
        assert len(run_id) == 32, f"run {name} failed:\n{run_id}"
        stored = client.get_run(run_id)
        assert stored.info.status == "FINISHED"
        assert stored.info.experiment_id == experiment.experiment_id
        assert stored.data.tags["stage"] == name and stored.data.params == {"seed": "0"}
        history = client.get_metric_history(run_id, "loss")
        assert sorted(m.step for m in history) == list(range(STEPS))
        report = Path(client.download_artifacts(run_id, "report.md", str(tmp_path / name)))
        assert report.read_text() == f"report of {name}"
