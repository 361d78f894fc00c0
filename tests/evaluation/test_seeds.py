"""Several training seeds of our model read as one: means, spread, and the per-user figures."""

from __future__ import annotations

import pytest
import torch

from hier_pipeline.evaluation.report import OURS
from hier_pipeline.evaluation.seeds import is_seed, pool_seeds, seed_name


def test_seed_rows_fold_into_ours_as_means_with_their_spread() -> None:
    names = [OURS, seed_name(1), seed_name(2)]
    metrics = {
        "popularity": {"map@10": 0.01},
        OURS: {"map@10": 0.10},
        seed_name(1): {"map@10": 0.20},
        seed_name(2): {"map@10": 0.30},
    }
    figures = {
        OURS: {"map@10": torch.tensor([0.0, 0.3])},
        seed_name(1): {"map@10": torch.tensor([0.3, 0.3])},
        seed_name(2): {"map@10": torch.tensor([0.6, 0.0])},
    }
    segment = {
        OURS: {"recall@50": 0.4},
        seed_name(1): {"recall@50": 0.5},
        seed_name(2): {"recall@50": 0.6},
    }
    spread = pool_seeds(names, metrics, figures, segment)
    assert metrics == {"popularity": {"map@10": 0.01}, OURS: {"map@10": pytest.approx(0.2)}}
    assert spread == {"map@10": pytest.approx(0.1)}  # sample sd of 0.1, 0.2, 0.3
    assert torch.allclose(figures[OURS]["map@10"], torch.tensor([0.3, 0.2]))
    assert list(figures) == [OURS] and segment == {OURS: {"recall@50": pytest.approx(0.5)}}
    assert is_seed(seed_name(1)) and not is_seed(OURS) and not is_seed(f"{OURS}_tokens")


def test_one_seed_changes_nothing() -> None:
    metrics = {OURS: {"map@10": 0.1}}
    assert pool_seeds([OURS], metrics, {OURS: {}}) == {} and metrics == {OURS: {"map@10": 0.1}}
