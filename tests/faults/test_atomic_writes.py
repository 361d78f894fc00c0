"""A failed write (disk full, a rename refused, a read-only folder) leaves the previous output as
it was, for every writer that goes through `atomic_path`: the DuckDB database, the saved graph,
the embedding cache segments and the evaluation report (whose `write_atomically` also writes the
release manifest, the training summary and the primitive map)."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pytest

from hier_pipeline.content.cache import EmbeddingCache
from hier_pipeline.dataset import load_dataset, parse_dataset
from hier_pipeline.dataset.sql import open_database
from hier_pipeline.evaluation.report import EvaluationReport
from hier_pipeline.evaluation.report_page import write_report
from hier_pipeline.files.atomic import atomic_path, partial_files
from hier_pipeline.graph import build_graph, load_graph, save_graph
from tests.builders import TINY_FILES, write_dataset

USERS = [TINY_FILES["users.csv"], TINY_FILES["users.csv"] + "4,2024-01-04,52\n"]


@dataclass
class Output:
    """One kind of output: write version 0 or 1 of it, read back what a reader sees."""

    write: Callable[[int], object]
    read: Callable[[], object]
    folder: Path


def _database(tmp_path: Path) -> Output:
    folders = [write_dataset(tmp_path / f"d{n}", files={"users.csv": USERS[n]}) for n in (0, 1)]
    target = tmp_path / "out" / "raw.duckdb"

    def read() -> object:
        with open_database(target) as connection:
            return connection.execute("SELECT count(*) FROM raw.users").fetchone()

    return Output(lambda n: load_dataset(parse_dataset(folders[n]), target), read, target.parent)


def _graph(tmp_path: Path) -> Output:
    graphs = []
    for n in (0, 1):
        spec = parse_dataset(write_dataset(tmp_path / f"d{n}", files={"users.csv": USERS[n]}))
        graphs.append(build_graph(spec, load_dataset(spec, tmp_path / f"db{n}.duckdb").database))
    target = tmp_path / "out" / "graph.pt"
    return Output(
        lambda n: save_graph(graphs[n], target),
        lambda: load_graph(target).data["users"].num_nodes,
        target.parent,
    )


def _cache_segment(tmp_path: Path) -> Output:
    cache = EmbeddingCache(tmp_path / "cache", "enc/v1", 4)
    keys = [cache.key(bytes([i])) for i in range(2)]
    return Output(
        lambda n: cache.put(keys[: n + 1], np.ones((n + 1, 4), np.float32)),
        lambda: sorted(cache.lookup(keys)),
        cache.folder,
    )


def _report(tmp_path: Path) -> Output:
    folder = tmp_path / "evaluation"

    def write(n: int) -> None:
        scores = {"map@10": 0.1 + n, "recall@10": 0.2, "recall@50": 0.3, "recall@100": 0.4}
        write_report(
            EvaluationReport("tiny", "purchase", 0, 86_400, 172_800, {"hier": scores}), folder
        )

    def read() -> object:
        metrics = json.loads((folder / "metrics.json").read_text())
        return metrics["models"]["hier"]["map@10"], (folder / "report.md").read_text()

    return Output(write, read, folder)


@pytest.fixture(params=[_database, _graph, _cache_segment, _report], ids=lambda f: f.__name__[1:])
def output(request: pytest.FixtureRequest, tmp_path: Path) -> Output:
    made: Output = request.param(tmp_path)
    return made


def _failing(name: str, code: int) -> Callable[..., None]:
    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code), name)

    return fail


@pytest.mark.parametrize(
    ("fault", "target"),
    [
        ("disk full when flushing", "os.fsync"),
        ("rename refused", "os.replace"),
    ],
)
def test_a_failed_write_keeps_the_previous_output(
    output: Output, monkeypatch: pytest.MonkeyPatch, fault: str, target: str
) -> None:
    output.write(0)
    before = output.read()
    with monkeypatch.context() as patched:
        code = errno.ENOSPC if target == "os.fsync" else errno.EIO
        patched.setattr(target, _failing(fault, code))
        with pytest.raises(OSError, match=os.strerror(code)):
            output.write(1)
    assert output.read() == before
    assert not partial_files(output.folder)
    assert not list(output.folder.glob("*.wal"))
    output.write(1)  # the same write succeeds once the fault is gone, and is seen
    assert output.read() != before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_keeps_the_previous_output(output: Output) -> None:
    output.write(0)
    before = output.read()
    output.folder.chmod(0o555)
    try:
        with pytest.raises((OSError, duckdb.Error)):
            output.write(1)
    finally:
        output.folder.chmod(0o755)
    assert output.read() == before


def test_a_writer_that_dies_half_way_leaves_no_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "metrics.json"
    target.write_text("previous")
    with pytest.raises(OSError, match="No space left"), atomic_path(target) as partial:
        with open(partial, "w") as handle:
            handle.write("half of the n")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(partial))
    assert target.read_text() == "previous"
    assert not partial_files(tmp_path)
