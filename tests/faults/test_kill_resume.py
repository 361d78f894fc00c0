"""A training process killed with SIGKILL in its second epoch resumes from its first epoch's
checkpoint when started again, and ends with the history and weights of a run never interrupted.

Each run is a real child process calling `train_model` on one thread (multithreaded scatter-adds
sum in varying order, so only one thread is deterministic to float precision)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from hier_pipeline.graph import save_graph
from hier_pipeline.model.checkpoint import LAST
from tests.model.test_train import assert_same_training

REPO = Path(__file__).resolve().parents[2]

# argv: inputs folder, run folder, "pause" or "run". Paused, the child stops at its second epoch's
# progress report, before that epoch's checkpoint: however slow the test is to notice the first
# checkpoint, the kill lands before the second one, during the second epoch.
TRAIN = """
import sys, time
from pathlib import Path

import torch

from hier_pipeline.graph import default_split, load_graph
from hier_pipeline.model.train import train_model
from tests.model.test_train import TINY

inputs, folder, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]


def progress(line: str) -> None:
    print(line, flush=True)
    if mode == "pause" and line.startswith("epoch 2/"):
        time.sleep(600)


graph = load_graph(inputs / "graph.pt")
content = torch.load(inputs / "content.pt", weights_only=True)
trained = train_model(
    graph, content, default_split(graph), TINY, checkpoint_dir=folder / "checkpoints",
    progress=progress,
)
torch.save({"history": trained.history, "weights": trained.model.state_dict()}, folder / "out.pt")
"""


def _start(inputs: Path, folder: Path, mode: str) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "log.txt", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-c", TRAIN, str(inputs), str(folder), mode],
            cwd=REPO,
            env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _finished(
    process: subprocess.Popen[bytes], folder: Path
) -> tuple[list[dict[str, float]], dict]:
    assert process.wait(300) == 0, (folder / "log.txt").read_text()[-3000:]
    result = torch.load(folder / "out.pt", weights_only=True)
    return result["history"], result["weights"]


def _epochs_in(checkpoint: Path) -> int:
    return len(torch.load(checkpoint, weights_only=True)["history"])


def test_training_killed_mid_epoch_resumes_to_the_uninterrupted_result(
    synthetic_pipeline: tuple, tmp_path: Path
) -> None:
    graph, content, _ = synthetic_pipeline
    inputs = tmp_path / "inputs"
    save_graph(graph, inputs / "graph.pt")
    torch.save(content, inputs / "content.pt")
    straight = _start(inputs, tmp_path / "straight", "run")  # alongside, on a second core if any

    folder = tmp_path / "killed"
    checkpoint = folder / "checkpoints" / LAST
    child = _start(inputs, folder, "pause")
    deadline = time.monotonic() + 300  # a guard against a hung child, not a timing assertion
    while not checkpoint.is_file() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    assert child.wait(60) == -signal.SIGKILL, (folder / "log.txt").read_text()[-3000:]
    assert _epochs_in(checkpoint) == 1  # killed after the first epoch's checkpoint, in the second
    assert "epoch 1/2" in (folder / "log.txt").read_text()

    resumed = _finished(_start(inputs, folder, "run"), folder)
    uninterrupted = _finished(straight, tmp_path / "straight")
    assert len(resumed[0]) == len(uninterrupted[0]) == 2
    assert _epochs_in(checkpoint) == 2
    assert_same_training(uninterrupted, resumed)
