"""Where the model trains: the `device` setting, and a model trained anywhere served on the CPU.

The GPU tests run only where CUDA is; CI has none, so there they are skipped, and the CPU tests
check what holds on every machine.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from hier_pipeline.model.checkpoint import LAST
from hier_pipeline.model.device import model_device, resolve_device
from hier_pipeline.model.train import train_model
from tests.model.test_train import TINY

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


def test_auto_is_the_gpu_where_cuda_is_and_the_cpu_elsewhere() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("name", ["tpu", "banana", "", "meta", "mps"])
def test_a_device_that_is_not_cpu_or_cuda_is_refused_by_name(name: str) -> None:
    with pytest.raises(ValueError, match=f"training device '{name}': use auto, cpu, cuda"):
        resolve_device(name)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_asking_for_a_gpu_on_a_machine_without_one_says_so(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no CUDA device .* use device auto or cpu"):
        resolve_device("cuda")
    # `hier train` refuses before reading any data: the dataset folder does not even exist.
    hier = Path(sys.executable).with_name("hier")
    result = subprocess.run(
        [str(hier), "train", str(tmp_path / "absent"), "--out", str(tmp_path), "--device", "cuda"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "hier train: training device 'cuda': this machine has no CUDA device" in result.stderr


def test_a_trained_model_and_its_checkpoint_are_on_the_cpu(
    synthetic_pipeline: tuple, tmp_path: Path
) -> None:
    """Whatever `device` trained it: artifacts written from it load on a machine without a GPU."""
    graph, content, split = synthetic_pipeline
    config = replace(TINY, epochs=1, device="auto")
    result = train_model(graph, content, split, config, checkpoint_dir=tmp_path)
    assert model_device(result.model) == torch.device("cpu")
    payload = torch.load(tmp_path / LAST, map_location="cpu", weights_only=True)
    assert all(value.device.type == "cpu" for value in payload["best_weights"].values())


@needs_cuda
@pytest.mark.parametrize("amp", [False, True])
def test_a_gpu_training_follows_the_cpu_training(synthetic_pipeline: tuple, amp: bool) -> None:
    """The same examples, neighbourhoods and initial weights (every draw is on the CPU's
    generators: the default config has no dropout, the one draw a GPU would make), so the first
    epoch's losses agree up to kernel rounding (bfloat16's with `amp`), and the model comes back
    to the CPU."""
    graph, content, split = synthetic_pipeline
    config = replace(TINY, epochs=1)
    on_cpu = train_model(graph, content, split, replace(config, device="cpu"))
    on_gpu = train_model(graph, content, split, replace(config, device="cuda", amp=amp))
    assert model_device(on_gpu.model) == torch.device("cpu")
    tolerance = 0.05 if amp else 1e-3
    for key in ("loss/ranking", "loss/total"):
        assert on_gpu.history[0][key] == pytest.approx(on_cpu.history[0][key], rel=tolerance)
