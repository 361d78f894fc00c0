"""Per-epoch checkpoints, so a killed training resumes where it stopped with the same randomness.

Everything is plain tensors, numbers and lists: `torch.load(weights_only=True)` reads it, and no
pickled code ever runs. Written to a temporary file, then renamed: a crash mid-write keeps the
previous checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from hier_pipeline.atomic import atomic_path
from hier_pipeline.config_hash import config_hash

if TYPE_CHECKING:
    from hier_pipeline.model.train import Trainer

LAST = "last.pt"


@dataclass
class CheckpointState:
    history: list[dict[str, float]]
    best_epoch: int
    best_map: float
    best_weights: dict[str, Tensor]


def _generators(trainer: Trainer) -> dict[str, Any]:
    return {
        "trainer": trainer.rng.bit_generator,
        "examples": trainer.examples.rng.bit_generator,
        "sampler": trainer.sampler.rng.bit_generator,
    }


def resume_key(params: Mapping[str, object], inputs: Sequence[Path]) -> str:
    """The checkpoint folder name of a training: the same config on the same input files gives
    the same key, so a killed run's rerun finds its checkpoint (a tracking run id is new every
    time); an input rewritten since (new size or modification time) starts afresh."""
    stamps = {str(path): (path.stat().st_size, path.stat().st_mtime_ns) for path in inputs}
    return config_hash({**params, "inputs": stamps})


def save_checkpoint(
    folder: Path,
    trainer: Trainer,
    history: list[dict[str, float]],
    best_epoch: int,
    best_map: float,
    best_weights: dict[str, Tensor],
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        "model": trainer.model.state_dict(),
        "teacher": trainer.teacher.state_dict(),
        "distillation": trainer.distillation.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "history": history,
        "best_epoch": best_epoch,
        "best_map": best_map,
        "best_weights": best_weights,
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": {name: generator.state for name, generator in _generators(trainer).items()},
    }
    with atomic_path(folder / LAST) as partial:
        torch.save(payload, partial)
    return folder / LAST


def load_checkpoint(folder: Path, trainer: Trainer) -> CheckpointState | None:
    """Restore `trainer` from `folder/last.pt` if it exists; None for a fresh start."""
    path = folder / LAST
    if not path.is_file():
        return None
    payload = torch.load(path, weights_only=True)
    trainer.model.load_state_dict(payload["model"])
    trainer.teacher.load_state_dict(payload["teacher"])
    trainer.distillation.load_state_dict(payload["distillation"])
    trainer.optimizer.load_state_dict(payload["optimizer"])
    torch.set_rng_state(payload["torch_rng"])
    for name, generator in _generators(trainer).items():
        generator.state = payload["numpy_rng"][name]
    return CheckpointState(
        payload["history"], payload["best_epoch"], payload["best_map"], payload["best_weights"]
    )
