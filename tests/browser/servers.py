"""The two UIs as real processes on free loopback ports: `dagster dev` and `mlflow server`.

Each server runs in a session of its own so that stopping it stops its children too (`dagster dev`
starts a webserver, a daemon and a code server). `dagster dev` ignores SIGINT when started in the
background, so it is stopped with SIGTERM on its process group, then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Server:
    url: str
    log: Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def wait_for(ready: Callable[[], bool], timeout: float, what: str, log: Path | None = None) -> None:
    """Poll `ready` until it holds; on timeout fail with the end of the server's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except requests.RequestException:
            pass
        time.sleep(1.0)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise TimeoutError(f"{what} not ready after {timeout:.0f} s\n{tail}")


@contextmanager
def running(
    command: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as sink:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes], grace: float = 20.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def graphql(url: str, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One GraphQL request to the Dagster webserver; errors raise."""
    response = requests.post(
        f"{url}/graphql", json={"query": query, "variables": dict(variables or {})}, timeout=60
    )
    response.raise_for_status()
    body = response.json()
    if body.get("errors"):
        raise RuntimeError(body["errors"])
    return dict(body["data"])


LOCATION_STATUS = """
{ workspaceOrError { ... on Workspace { locationEntries {
    name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""


def code_location_loaded(url: str, name: str) -> bool:
    entries = graphql(url, LOCATION_STATUS)["workspaceOrError"]["locationEntries"]
    for entry in entries:
        if entry["name"] == name and entry["loadStatus"] == "LOADED":
            error = entry["locationOrLoadError"]
            if error["__typename"] == "PythonError":
                raise RuntimeError(f"code location {name} failed to load: {error['message']}")
            return True
    return False
