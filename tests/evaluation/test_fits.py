"""The trained baselines' fitting machinery: a step budget, not a wall clock; fits that a
longer rung of successive halving continues; memos whose fits are freed when cleared."""

from __future__ import annotations

import gc
import threading
import weakref

import torch

from hier_pipeline.evaluation.baselines import FitBudget, LightGCNRecommender
from hier_pipeline.evaluation.baselines.evaluate import FIT_BUDGET
from hier_pipeline.evaluation.baselines.recommender import Fits, Memo
from tests.evaluation.histories import events


def test_fits_continue_a_shorter_fit_as_if_it_had_never_stopped() -> None:
    starts: list[str] = []

    def start() -> list[float]:
        starts.append("start")
        torch.manual_seed(0)
        return []

    def step(draws: list[float]) -> None:  # from torch's global generator, as dropout draws
        draws.append(torch.rand(()).item())

    torch.manual_seed(0)
    uninterrupted = [torch.rand(()).item() for _ in range(5)]
    fits = Fits()
    assert fits.train("a", FitBudget(2), start, step) == uninterrupted[:2]
    torch.rand(10)  # anything run between the rungs moves the global generator
    assert fits.train("a", FitBudget(5), start, step) == uninterrupted
    assert starts == ["start"]  # continued, not started over
    assert fits.train("a", FitBudget(3), start, step) == uninterrupted[:3]  # shorter: anew
    assert fits.train("b", FitBudget(1), start, step) == uninterrupted[:1]  # its own fit
    assert len(starts) == 3


def test_clearing_a_memo_frees_a_trained_fit_without_the_garbage_collector() -> None:
    """A memo's `Fits` keep their steps' closures, which hold the recommender, which holds the
    memo: a cycle. `evaluate_baselines` clears each baseline's memo so the fit is freed at once,
    not whenever the collector runs, while the next baselines need the memory."""
    rows = [(u, i, 1.0, 1) for u in range(4) for i in range(4) if u != i]
    memo = Memo()
    model = LightGCNRecommender(
        torch.zeros(4, dtype=torch.long), dim=8, budget=FitBudget(steps=3), memo=memo
    )
    model.fit(events(rows, 4, 4))
    fitted = weakref.ref(model.users)
    collecting = gc.isenabled()
    gc.disable()
    try:
        del model
        assert fitted() is not None  # held by the memo's fit
        memo.clear()
        assert fitted() is None
    finally:
        if collecting:
            gc.enable()


def test_a_trained_baseline_scores_the_same_on_a_busy_machine() -> None:
    """A step budget, not a wall clock: the same seed and steps give the same scores whether the
    machine is idle or another thread keeps it busy (a seconds cap would cut the busy fit short)."""
    rows = [(u, i, 1.0, 1) for u in range(8) for i in range(8) if (u + i) % 3 == 0]
    history = events(rows, 8, 8)

    def fitted() -> torch.Tensor:
        model = LightGCNRecommender(
            torch.zeros(8, dtype=torch.long), dim=8, budget=FitBudget(steps=30), batch_size=32
        )
        model.fit(history)
        return model.score(torch.arange(8))

    idle = fitted()
    stop = threading.Event()

    def spin() -> None:  # its own generator: the fit seeds the global one
        matrix = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))
        while not stop.is_set():
            matrix = torch.tanh(matrix @ matrix)

    busy = threading.Thread(target=spin)
    busy.start()
    try:
        loaded = fitted()
    finally:
        stop.set()
        busy.join()
    assert torch.equal(idle, loaded)
    assert FIT_BUDGET.seconds is None  # the evaluation's default budget is steps alone
