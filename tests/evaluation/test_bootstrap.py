"""The bootstrap intervals on cases whose answer is known."""

from __future__ import annotations

import math

import pytest
import torch

from hier_pipeline.ranking.bootstrap import mean_interval, paired_difference


def test_a_constant_difference_has_no_width() -> None:
    """Model a is model b plus 0.1 for every user: every resample differs by exactly 0.1, however
    much the users differ among themselves (a paired test sees through that; an unpaired one
    would not)."""
    b = torch.rand(500, generator=torch.Generator().manual_seed(0))
    found = paired_difference(b + 0.1, b)
    assert found.diff == pytest.approx(0.1, abs=1e-6)
    assert found.low == pytest.approx(0.1, abs=1e-6) and found.high == pytest.approx(0.1, abs=1e-6)


def test_the_interval_matches_the_normal_approximation() -> None:
    """Per-user differences of +-1 with equal odds: mean 0, sd 1, so the 95% interval of the mean
    of n = 2,500 is close to +-1.96 / sqrt(n) = +-0.0392."""
    n = 2500
    signs = torch.ones(n)
    signs[torch.randperm(n, generator=torch.Generator().manual_seed(1))[: n // 2]] = -1.0
    found = paired_difference(signs, torch.zeros(n), resamples=4000)
    half = 1.96 / math.sqrt(n)
    assert found.diff == pytest.approx(0.0, abs=1e-9)
    assert found.low == pytest.approx(-half, rel=0.1) and found.high == pytest.approx(half, rel=0.1)


def test_a_clear_win_excludes_zero_and_a_tie_does_not() -> None:
    generator = torch.Generator().manual_seed(2)
    b = torch.rand(400, generator=generator)
    noise = torch.randn(400, generator=generator) * 0.2
    assert paired_difference(b + 0.1 + noise, b).low > 0
    tie = paired_difference(b + noise, b)
    assert tie.low < 0 < tie.high


def test_the_same_seed_gives_the_same_interval_and_nothing_gives_nan() -> None:
    values = torch.rand(100, generator=torch.Generator().manual_seed(3))
    assert mean_interval(values, seed=4) == mean_interval(values, seed=4)
    low, high = mean_interval(values)
    assert low < values.mean().item() < high
    assert all(math.isnan(v) for v in mean_interval(torch.zeros(0)))
    with pytest.raises(ValueError, match="differ in shape"):
        paired_difference(torch.zeros(3), torch.zeros(4))
