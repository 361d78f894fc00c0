"""How a training run progresses, epoch by epoch: the seconds it may spend, what each epoch
records, and whether its loss fell (the `training_loss_decreased` check reads that)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class TimeBudget:
    """Training seconds allowed and used; `None` allows any."""

    seconds: float | None
    used: float = 0.0

    def spent(self, running: float = 0.0) -> bool:
        return self.seconds is not None and self.used + running >= self.seconds

    def charge(self, seconds: float) -> None:
        self.used += seconds


def epoch_record(
    parts: list[dict[str, float]], seconds: float, batch_size: int
) -> dict[str, float]:
    """An epoch's history entry from its steps' loss parts: their means, the mean loss of its
    first and last quarter of steps (so whether the loss fell can be told within one epoch: a
    one-epoch run, or one its time budget stopped), its seconds and throughput."""
    quarter = max(1, len(parts) // 4)
    losses = [part["loss/total"] for part in parts]
    record = {key: float(np.mean([p[key] for p in parts])) for key in parts[0]}
    record["loss/first_steps"] = float(np.mean(losses[:quarter]))
    record["loss/last_steps"] = float(np.mean(losses[-quarter:]))
    record["time/epoch_seconds"] = seconds
    record["throughput/examples_per_second"] = len(parts) * batch_size / seconds
    return record


def loss_fell(history: list[dict[str, float]]) -> tuple[float, float]:
    """(the loss of training's first steps, of its last steps): the first quarter of the first
    epoch against the last quarter of the last one. Equal when training took a single step.
    Histories recorded before the quarters were (pickled artifacts) fall back to epoch means."""
    first, last = history[0], history[-1]
    return (
        first.get("loss/first_steps", first["loss/total"]),
        last.get("loss/last_steps", last["loss/total"]),
    )
