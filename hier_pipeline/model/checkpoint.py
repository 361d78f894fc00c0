"""Per-epoch checkpoints, so a killed training resumes where it stopped with the same randomness.

Everything is plain tensors, numbers and lists: `torch.load(weights_only=True)` reads it, and no
pickled code ever runs. Written to a temporary file, then renamed: a crash mid-write keeps the
previous checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from hier_pipeline.config_hash import config_hash
from hier_pipeline.files.atomic import atomic_path

LAST = "last.pt"


@dataclass(frozen=True)
class Restorable:
    """What a checkpoint saves of a training and puts back: its modules (model, teacher, ...), the
    optimizer and every random generator it draws from, each under a stable name."""

    modules: Mapping[str, nn.Module]
    optimizer: torch.optim.Optimizer
    generators: Mapping[str, np.random.Generator]


@dataclass
class CheckpointState:
    history: list[dict[str, float]]
    best_epoch: int
    best_map: float
    best_weights: dict[str, Tensor]


def resume_key(params: Mapping[str, object], inputs: Sequence[Path]) -> str:
    """The checkpoint folder name of a training: the same config on the same input files gives
    the same key, so a killed run's rerun finds its checkpoint (a tracking run id is new every
    time); an input rewritten since (new size or modification time) starts afresh."""
    stamps = {str(path): (path.stat().st_size, path.stat().st_mtime_ns) for path in inputs}
    return config_hash({**params, "inputs": stamps})


def save_checkpoint(
    folder: Path,
    training: Restorable,
    history: list[dict[str, float]],
    best_epoch: int,
    best_map: float,
    best_weights: dict[str, Tensor],
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        **{name: module.state_dict() for name, module in training.modules.items()},
        "optimizer": training.optimizer.state_dict(),
        "history": history,
        "best_epoch": best_epoch,
        "best_map": best_map,
        "best_weights": best_weights,
        "torch_rng": torch.get_rng_state(),
        # Dropout on a GPU draws from CUDA's generators (none on a CPU-only machine).
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy_rng": {
            name: generator.bit_generator.state for name, generator in training.generators.items()
        },
    }
    with atomic_path(folder / LAST) as partial:
        torch.save(payload, partial)
    return folder / LAST


def load_checkpoint(folder: Path, training: Restorable) -> CheckpointState | None:
    """Restore `training` from `folder/last.pt` if it exists; None for a fresh start."""
    path = folder / LAST
    if not path.is_file():
        return None
    # Tensors come back to the CPU first: a run checkpointed on a GPU resumes on any machine
    # (the modules and the optimizer copy them to where their own tensors are).
    payload = torch.load(path, map_location="cpu", weights_only=True)
    for name, module in training.modules.items():
        module.load_state_dict(payload[name])
    training.optimizer.load_state_dict(payload["optimizer"])
    torch.set_rng_state(payload["torch_rng"])
    if payload.get("cuda_rng") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(payload["cuda_rng"])
    for name, generator in training.generators.items():
        generator.bit_generator.state = payload["numpy_rng"][name]
    return CheckpointState(
        payload["history"], payload["best_epoch"], payload["best_map"], payload["best_weights"]
    )
