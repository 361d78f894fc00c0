"""`forked_map`: jobs in forked one-thread processes, their results, failures and deaths."""

from __future__ import annotations

import os
import signal
import threading

import pytest
import torch

from hier_pipeline.evaluation.baselines.workers import forked_map


def test_each_job_runs_in_a_fork_of_its_own_on_one_thread_with_the_parents_state() -> None:
    lock = threading.Lock()  # unpicklable: the job reaches the parent's state by fork, not pickle
    parent = os.getpid()

    def job(n: int) -> tuple[int, int, int, bool]:
        return n * n, os.getpid(), torch.get_num_threads(), lock is not None

    done = dict(forked_map(job, [3, 1, 4, 1, 5], workers=2))
    assert sorted(done) == [0, 1, 2, 3, 4]
    assert [done[i][0] for i in range(5)] == [9, 1, 16, 1, 25]
    pids = [done[i][1] for i in range(5)]
    assert parent not in pids and len(set(pids)) == 5  # a fresh fork per job
    assert all(threads == 1 and reached for _, _, threads, reached in done.values())


def test_one_worker_runs_the_jobs_here_in_order() -> None:
    assert list(forked_map(lambda n: (n, os.getpid()), [2, 7], workers=1)) == [
        (0, (2, os.getpid())),
        (1, (7, os.getpid())),
    ]


def test_a_jobs_exception_is_raised_here_with_its_traceback() -> None:
    def job(name: str) -> str:
        if name == "ease":
            raise ValueError("no items in the window")
        return name

    with pytest.raises(RuntimeError, match="worker for 'ease' failed") as raised:
        list(forked_map(job, ["ease", "repeat"], workers=2))
    assert "ValueError: no items in the window" in str(raised.value)


def test_a_worker_killed_is_named_not_waited_for() -> None:
    def job(name: str) -> str:
        if name == "lightgcn":
            os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer would
        return name

    with pytest.raises(RuntimeError, match=r"worker for 'lightgcn' died \(exit code -9\)"):
        list(forked_map(job, ["lightgcn", "repeat"], workers=2))
