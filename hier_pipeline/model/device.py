"""Where the interest model trains: the `device` setting resolved to a torch device, and the
mixed precision it may use there.

Sampling, histories and every artifact stay on the CPU; only the model, its batches and its
losses move. A training therefore returns its model on the CPU (`train.py`), and a model trained
on a GPU loads and serves on a machine without one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

AUTO = "auto"

# cuBLAS picks its reduction order per call unless told otherwise; with PyTorch's deterministic
# kernels on, a CUDA matmul raises without this setting (PyTorch's reproducibility notes).
_CUBLAS_WORKSPACE = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def resolve_device(name: str, deterministic: bool = True) -> torch.device:
    """``"auto"``: this process's GPU when CUDA is present (``LOCAL_RANK``'s under `torchrun`),
    else the CPU; ``"cpu"``, ``"cuda"`` or ``"cuda:N"``: that one, or a ValueError saying why
    it is not there."""
    if name == AUTO:
        name = f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:  # not a device string at all
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ValueError(f"training device {name!r}: use auto, cpu, cuda or cuda:N")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"training device {name!r}: this machine has no CUDA device (or torch is a CPU"
                " build); use device auto or cpu"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(
                f"training device {name!r}: only {torch.cuda.device_count()} CUDA device(s)"
            )
        if deterministic:
            os.environ.setdefault(*_CUBLAS_WORKSPACE)
    return device


def model_device(model: torch.nn.Module) -> torch.device:
    """Where `model`'s weights are (a model without any is taken to be on the CPU)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


@contextmanager
def mixed_precision(device: torch.device, enabled: bool) -> Iterator[None]:
    """bfloat16 autocast of a training step's forward pass and losses on a GPU when `enabled`;
    nothing on a CPU, where bfloat16 matmuls are slower than float32 on most cores. bfloat16
    keeps float32's range, so no loss scaling is needed, and autocast runs softmax, log-softmax
    and norms in float32 by its own op lists."""
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=enabled and device.type == "cuda"):
        yield
