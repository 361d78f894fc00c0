"""One intra-op thread for the evaluation tests: on a shared two-core machine, OpenMP threads
contending with other processes made sparse scatters ~500x slower than a single thread."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def single_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
