"""Independent jobs side by side in forked, single-threaded worker processes.

Why processes, and why one thread each: a GraphSAGE or SASRec step is many small tensor ops, and
a second intra-op thread barely shortens it (Complete Journey, GraphSAGE: 0.107 s a step on one
thread, 0.098 on two), while two such fits in two processes run at one-thread speed each. Why
fork: a worker reads the parent's graph and content without copying or pickling them (gigabytes
on Complete Journey). Why one thread: a forked child of a process that has used OpenMP hangs in
its first parallel region (GNU libgomp is not fork-safe), and a single thread never enters one.
Each job gets a fresh fork, so it starts from the parent's state whatever ran before it, and the
memory it allocated goes back to the system when it ends."""

from __future__ import annotations

import multiprocessing
import pickle
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar, cast

T = TypeVar("T")
R = TypeVar("R")


def forked_map(job: Callable[[T], R], items: Sequence[T], workers: int) -> Iterator[tuple[int, R]]:
    """(index, job(item)) for every item, as each finishes, in up to `workers` forked processes
    of one torch thread each (module doc); items start in the order given, so put the longest
    first. With one worker, one item or no fork (Windows) the jobs run here, in order, on this
    process's threads. A job's exception is raised here, and so is a worker's death (killed for
    memory, say), naming its item."""
    if workers <= 1 or len(items) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for index, item in enumerate(items):
            yield index, job(item)
        return
    context = multiprocessing.get_context("fork")
    waiting = list(enumerate(items))[::-1]
    running: dict[Connection, tuple[int, BaseProcess]] = {}
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                index, item = waiting.pop()
                receiver, sender = context.Pipe(duplex=False)
                worker = context.Process(target=_run, args=(job, item, sender), daemon=True)
                worker.start()
                sender.close()  # the child's end: EOF here once the child is gone
                running[receiver] = (index, worker)
            for ready in wait(list(running)):
                receiver = cast(Connection, ready)
                index, process = running.pop(receiver)
                try:
                    failed, value = pickle.loads(receiver.recv_bytes())
                except EOFError:
                    process.join()
                    raise RuntimeError(
                        f"the worker for {items[index]!r} died (exit code {process.exitcode})"
                    ) from None
                process.join()
                if failed:
                    raise RuntimeError(f"the worker for {items[index]!r} failed:\n{value}")
                yield index, value
    finally:
        for _, process in running.values():
            process.kill()
            process.join()


def _run(job: Callable[[Any], Any], item: Any, sender: Connection) -> None:
    """A worker: one torch thread (module doc), the job, and its result or its traceback (an
    exception may not pickle) sent back. Plain pickle: multiprocessing's would send a tensor as
    a shared-memory handle, which dies with this process before the parent reads it."""
    import torch

    torch.set_num_threads(1)
    try:
        result = job(item)
    except BaseException:
        sender.send_bytes(pickle.dumps((True, traceback.format_exc())))
        return
    sender.send_bytes(pickle.dumps((False, result)))
