"""An MLflow server that cannot be reached stops a stage within seconds, with a message naming the
server, before the stage has written anything."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hier_pipeline.files.atomic import atomic_path
from hier_pipeline.tracking import TrackingUnavailable
from resources import MLflowResource


@pytest.fixture(autouse=True)
def no_mlflow_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's own retries (7, with backoff) would make a failing test take minutes."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def hanging_up_server() -> Iterator[int]:
    """A port that accepts connections and closes them at once (a proxy whose backend is down)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join(5)
    server.close()


def _stage(resource: MLflowResource, output: Path) -> None:
    """A stage as the assets run one: open the run, then write the output."""
    with resource.run("stage") as run, atomic_path(output) as partial:
        partial.write_text(f"new output of run {run.run_id}")


@pytest.mark.parametrize("credentials", ["", "alice:s3cret@"])
def test_closed_port_fails_fast_and_writes_nothing(tmp_path: Path, credentials: str) -> None:
    output = tmp_path / "stage" / "output.txt"
    output.parent.mkdir()
    output.write_text("previous output")
    port = _closed_port()
    resource = MLflowResource(tracking_uri=f"http://{credentials}127.0.0.1:{port}")
    started = time.monotonic()
    with pytest.raises(TrackingUnavailable) as caught:
        _stage(resource, output)
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert f"the MLflow tracking server http://127.0.0.1:{port} is unreachable" in message
    assert "s3cret" not in message
    assert output.read_text() == "previous output"
    assert [p.name for p in output.parent.iterdir()] == ["output.txt"]


def test_server_that_hangs_up_fails_fast_and_writes_nothing(
    tmp_path: Path, hanging_up_server: int
) -> None:
    output = tmp_path / "output.txt"
    started = time.monotonic()
    with pytest.raises(TrackingUnavailable, match="refused to open a run"):
        _stage(MLflowResource(tracking_uri=f"http://127.0.0.1:{hanging_up_server}"), output)
    assert time.monotonic() - started < 30
    assert not list(tmp_path.iterdir())
