"""Our model trained with several seeds, read as one model: every figure of ours is the mean over
the seeds (per user, for the per-user figures the bootstrap resamples), and the report keeps the
spread (sd over seeds) beside it. The other seeds are scored as models named `hier@seed<k>`,
then folded into `hier` and dropped."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence

import torch
from torch import Tensor

from hier_pipeline.evaluation.report import OURS

SEED_MARK = "@seed"


def seed_name(offset: int) -> str:
    """The name our model trained with the base seed + `offset` is scored under."""
    return f"{OURS}{SEED_MARK}{offset}"


def is_seed(name: str) -> bool:
    return name.startswith(f"{OURS}{SEED_MARK}")


def pool_seeds(
    names: Sequence[str],
    metrics: MutableMapping[str, dict[str, float]],
    figures: MutableMapping[str, dict[str, Tensor]],
    *tables: MutableMapping[str, dict[str, float]],
) -> dict[str, float]:
    """Fold the rows `names` (`OURS` first, then its other seeds) into `OURS`, in place, in
    `metrics` (model -> metric), `figures` (model -> metric -> per-user values) and each of
    `tables` (model -> metric, e.g. a segment's recalls); returns the sd over seeds of each of
    `metrics[OURS]` (empty with one seed)."""
    if len(names) < 2:
        return {}
    spread = {metric: _over(metrics, names, metric).std().item() for metric in metrics[OURS]}
    for table in (metrics, *tables):
        table[OURS] = {m: _over(table, names, m).mean().item() for m in table[OURS]}
    figures[OURS] = {
        m: torch.stack([figures[n][m] for n in names]).mean(dim=0) for m in figures[OURS]
    }
    for name in names[1:]:
        del figures[name]
        for table in (metrics, *tables):
            del table[name]
    return spread


def _over(
    table: MutableMapping[str, dict[str, float]], names: Sequence[str], metric: str
) -> Tensor:
    """One metric of every seed (NaN stays NaN: an undefined figure has no mean either)."""
    return torch.tensor([table[name][metric] for name in names], dtype=torch.float64)
