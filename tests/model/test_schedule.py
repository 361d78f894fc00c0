"""The step budget's schedule: warm-up, cosine decay of the rate, the teacher's rising momentum."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest

from hier_pipeline.model.schedule import Schedule
from hier_pipeline.model.train_config import TrainConfig
from hier_pipeline.model.trainer import Trainer


def test_the_rate_warms_up_then_falls_by_a_cosine_to_its_floor() -> None:
    schedule = Schedule(total_steps=11, warmup_steps=2, min_lr_ratio=0.1)
    factors = [schedule.lr_factor(step) for step in range(11)]
    assert factors[:2] == pytest.approx([1 / 3, 2 / 3])
    assert factors[2] == pytest.approx(1.0)  # the warm-up's end: the full rate
    assert factors[-1] == pytest.approx(0.1)
    assert factors[6] == pytest.approx(0.55)  # half way through the decay: the mean
    assert all(a > b for a, b in pairwise(factors[2:]))


def test_the_teachers_momentum_rises_from_its_start_to_its_end() -> None:
    schedule = Schedule(total_steps=10, ema_start=0.99, ema_end=0.999)
    momenta = [schedule.ema_momentum(step) for step in range(10)]
    assert momenta[0] == pytest.approx(0.99) and momenta[-1] == pytest.approx(0.999)
    assert all(a < b for a, b in pairwise(momenta))


def test_without_the_cosine_rate_and_momentum_stay_put_after_the_warm_up() -> None:
    schedule = Schedule(total_steps=10, warmup_steps=1, cosine=False, ema_start=0.9, ema_end=0.999)
    assert [schedule.lr_factor(step) for step in range(1, 10)] == [1.0] * 9
    assert {schedule.ema_momentum(step) for step in range(10)} == {0.9}


@pytest.mark.parametrize(
    "arguments",
    [
        {"total_steps": 0},
        {"total_steps": 5, "warmup_steps": 6},
        {"total_steps": 5, "min_lr_ratio": 2.0},
    ],
)
def test_an_impossible_schedule_is_refused(arguments: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Schedule(**arguments)  # type: ignore[arg-type]


def test_each_step_takes_the_rate_of_its_index(synthetic_pipeline: tuple) -> None:
    graph, content, split = synthetic_pipeline
    config = replace(
        TrainConfig(epochs=1, steps_per_epoch=5, batch_size=32),
        warmup_steps=1,
        cosine_schedule=True,
        min_lr_ratio=0.2,
    )
    trainer = Trainer(graph, content, split, config)
    for index in (0, 1, 4):
        trainer.step(index)
        rate = trainer.optimizer.param_groups[0]["lr"]
        assert rate == pytest.approx(config.learning_rate * trainer.schedule.lr_factor(index))
    assert rate == pytest.approx(0.2 * config.learning_rate)
