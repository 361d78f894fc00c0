"""The training loop under `torchrun --nproc_per_node=2` with gloo, against one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# One step: the loss is measured at the shared initial weights. Over more steps a rank learns from
# the 64-example averaged gradient and a lone process from 32, and the history term learns fast
# enough for that to show in the epoch's mean loss.
ARGUMENTS = ["--epochs", "1", "--steps", "1", "--seed", "0"]


def hier_train(world: Path, out: Path, processes: int, batch_size: int) -> list[dict]:
    command = [
        str(Path(sys.executable).with_name("hier")),
        "train",
        str(world),
        "--out",
        str(out),
        "--batch-size",
        str(batch_size),
        *ARGUMENTS,
    ]
    if processes > 1:
        torchrun = [
            str(Path(sys.executable).with_name("torchrun")),
            "--standalone",
            f"--nproc_per_node={processes}",
        ]
        command = [*torchrun, "-m", "hier_pipeline.cli", *command[1:]]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=900, check=False, env=environment
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return [
        json.loads((out / f"rank{rank}" / "summary.json").read_text()) for rank in range(processes)
    ]


@pytest.mark.slow
def test_two_gloo_processes_train_like_one(synthetic_world: Path, tmp_path: Path) -> None:
    ranks = hier_train(synthetic_world, tmp_path / "ddp", processes=2, batch_size=64)
    alone = hier_train(synthetic_world, tmp_path / "single", processes=1, batch_size=32)[0]
    assert [r["world_size"] for r in ranks] == [2, 2]
    # Gradients are averaged every step, so both ranks end with the same weights.
    assert ranks[0]["weights_checksum"] == pytest.approx(ranks[1]["weights_checksum"], rel=1e-6)
    assert (tmp_path / "ddp" / "model.pt").is_file() and not (
        tmp_path / "ddp" / "rank1" / "model.pt"
    ).exists()
    # Each rank trains on 32 of every 64 examples: its loss matches a lone process with batch 32.
    distributed = ranks[0]["history"][0]["loss/ranking"]
    single = alone["history"][0]["loss/ranking"]
    assert distributed == pytest.approx(single, rel=0.15)
